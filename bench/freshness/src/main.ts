#!/usr/bin/env node
// Watch freshness benchmark: how long after a silently dropped watch (no FIN, no RST) does each
// cache see a change? Side by side: the kars Reflector (default shared config, and with pings
// off so only the idle deadline acts), the @kubernetes/client-node informer, and the
// kubernetes-fluent-client (KFC) Watcher. Also events/s one watcher sustains and heap per
// 10,000 cached objects. See bench/README.md ("Watch freshness") for what each number means.
//
//   npm run bench:freshness                                  # build, then defaults (8–10 min on the 2-core VM)
//   BENCH_QUICK=1 node bench/freshness/dist/main.js          # smoke test, ~1 min (needs a prior `npx tsc -b`)
//   BENCH_FAULT=blackhole node bench/freshness/dist/main.js  # also drop the frozen flows' packets (root + iptables)
//
// Env: BENCH_QUICK, BENCH_TRIALS, BENCH_FRESHNESS_CAP_SECS, BENCH_OBJECTS, BENCH_UPDATES,
// BENCH_MEM_OBJECTS, BENCH_PEERS, BENCH_PHASES, BENCH_FAULT, BENCH_RERUN_STUCK,
// BENCH_BOOKMARK_SECS, BENCH_KEEP (see the README table).
//
// `main.js --child <spec>` is a peer child (events/s and heap), forked by the benchmark itself.

import { runMain } from '../../lib/dist/index.js';
import { childMain } from './child.js';
import type { ChildSpec } from './ipc.js';
import { Blackhole } from './network.js';
import { main } from './run.js';

if (process.argv[2] === '--child') {
  void childMain(JSON.parse(String(process.argv[3])) as ChildSpec);
} else {
  // Third-party clients leave keep-alive sockets and timers behind (KFC keeps idle undici
  // connections for 10 min), so exit explicitly.
  runMain(main, { exit: true, onError: () => Blackhole.teardown() });
}

#!/usr/bin/env node
// Where does kars apiserver spend its time per write? Aggregates V8 `--cpu-prof` profiles
// (.cpuprofile files) into INCLUSIVE time per request stage: each sample is charged to the
// innermost frame on its stack that opens a stage (e.g. a JSON.parse inside readBody counts as
// "body read + JSON.parse", a clone inside trackUpdate as "managedFields"), so a stage's figure is
// the whole subtree under its entry functions, minus nested stages. Samples of module loading are
// "startup"; idle samples are left out. Only the window from the first to the last sample with the
// HTTP handler on the stack counts (so key generation at start and the idle tail do not), unless --all.
// --skip-ms N drops the first N ms of that window (e.g. the JIT warm-up), --take-ms N keeps N ms.
//
//   node bench/profile-stages/dist/main.js /tmp/prof-storage/*.cpuprofile [--ops N] [--top 12] [--json]
//
// With --ops N (writes served while profiling, e.g. 4,201 for one phase-0 server: namespace +
// 200 warm-up + 2,000 creates + 2,000 updates) the table also gives µs per write. Without it, only
// ms and shares. --top N lists, per stage, the N functions with the most self time inside it.
// --stage NAME prints the call paths (innermost 6 frames) that carry most of that stage's time.
// Profiles are wall-clock samples of the main thread: on a loaded machine, time the thread spent
// descheduled lands on whatever was on the stack. Compare shares, and compare runs at similar load.
import { readFileSync } from 'node:fs';
import { addProfile } from './aggregate.js';
import type { Accumulator, CpuProfile } from './aggregate.js';
import { jsonReport, markdownReport } from './report.js';

function main(): void {
  const args = process.argv.slice(2);
  const files: string[] = [];
  let ops: number | undefined;
  let top = 0;
  let json = false;
  let pathStage: string | undefined;
  let all = false;
  let skipMs = 0;
  let takeMs = 0;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--ops') ops = Number(args[++i]);
    else if (a === '--top') top = Number(args[++i]);
    else if (a === '--json') json = true;
    else if (a === '--stage') pathStage = args[++i];
    else if (a === '--all') all = true;
    else if (a === '--skip-ms') skipMs = Number(args[++i]);
    else if (a === '--take-ms') takeMs = Number(args[++i]);
    else files.push(a);
  }
  if (files.length === 0) {
    process.stderr.write(
      'usage: node bench/profile-stages/dist/main.js <file.cpuprofile>... [--ops N] [--top N] [--stage NAME] [--json]\n',
    );
    process.exit(2);
  }
  const acc: Accumulator = { stages: new Map(), self: new Map(), paths: new Map(), pathStage, all, windowUs: 0, skipMs, takeMs };
  for (const f of files) addProfile(JSON.parse(readFileSync(f, 'utf8')) as CpuProfile, acc);
  process.stdout.write(json ? jsonReport(files, ops, acc) : markdownReport(files, ops, top, acc));
}

main();

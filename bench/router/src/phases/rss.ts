/** The memory row after the load phases: VmRSS of the process doing each peer's hop. */
import { fmt1 } from '../../../lib/dist/index.js';
import { procRssMb } from '../procs.js';
import { need, type Run } from '../run.js';

/** One data-plane row: the RSS of each peer's process (direct: the stub itself). */
export function rssRow(run: Run): void {
  const { procs } = run;
  const rss = {
    stub: procRssMb(need(procs.stub, 'the stub').pid),
    proxy: procs.proxy ? procRssMb(procs.proxy.pid) : NaN,
    nginx: procs.nginx ? procRssMb(procs.nginx.pid) : NaN,
    portkey: procs.portkey ? procRssMb(procs.portkey.pid) : NaN,
    bare: procs.bare ? procRssMb(procs.bare.pid) : NaN,
    router: procRssMb(need(procs.router, 'the router').pid),
  };
  run.raw.rssAfterLoadMb = rss;
  run.dataRows.push({
    metric: 'RSS after the load phases',
    ...Object.fromEntries(run.cfg.peers.map((p) => [p, `${fmt1(p === 'direct' ? rss.stub : rss[p])} MB`])),
    diff: '',
    goal: '–',
    notes: `VmRSS of the process doing the hop (direct: the stub itself); the router is the full \`kars\` CLI process`,
  });
}

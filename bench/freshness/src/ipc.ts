/**
 * The fork IPC between the benchmark process and a peer child (events/s and heap per cached
 * object): what the child is asked to do, and what it reports back.
 */
import type { PeerKind } from '../../watch-peers/dist/index.js';

/** What a peer child runs: one peer alone, for events/s (`throughput`) or heap (`memory`). */
export type ChildSpec = {
  peer: PeerKind;
  kubeconfig: string;
  namespace: string;
  /** Objects the peer must hold once listed. */
  expect: number;
  /** The ConfigMap the probe edits go to. */
  probeName: string;
} & ({ role: 'throughput' } | { role: 'memory'; warmNamespace: string; warmCount: number });

/** A command from the benchmark process to a peer child. */
export type ParentCommand =
  { cmd: 'start' } | { cmd: 'probe'; value: string } | { cmd: 'measure' } | { cmd: 'go' } | { cmd: 'report' } | { cmd: 'exit' };

/** The heap figures a memory child reports (before and after its peer listed). */
export type MemoryFigures = NodeJS.MemoryUsage;

/** An event from a peer child to the benchmark process. */
export type ChildEvent =
  | { ev: 'ready' }
  | { ev: 'listed'; ms: number }
  | { ev: 'probe-armed' }
  | { ev: 'synced'; ms: number }
  | { ev: 'memory'; base: MemoryFigures; after: MemoryFigures; size: number; listedMs: number }
  | { ev: 'armed' }
  | { ev: 'progress'; count: number; lastUs: number }
  | {
      ev: 'report';
      count: number;
      firstUs: number;
      lastUs: number;
      cpuUserUs: number;
      cpuSystemUs: number;
      heapUsed: number;
    }
  | { ev: 'error'; error: string | undefined };

/** The kind of a {@link ChildEvent}. */
export type ChildEventName = ChildEvent['ev'];

/** The {@link ChildEvent} of kind `E`. */
export type EventOf<E extends ChildEventName> = Extract<ChildEvent, { ev: E }>;

/**
 * The vocabulary of the differential suite (issue 19): a scenario is a scripted sequence of steps
 * run against kars apiserver and kube-apiserver, each fresh; its outcome is the normalised answers.
 */

/** Who sends a request: the admin, a ServiceAccount's TokenRequest token, nobody, or a bogus token. */
export type Identity = 'admin' | 'none' | 'badtoken' | { serviceAccount: string; namespace?: string };

/** How much of an answer counts: all of it (the default), the status code, or accepted/refused. */
export type CompareMode = 'full' | 'status' | 'outcome';

/** One HTTP request. Strings may use `{{ns}}` and `{{var}}` (a value saved by an earlier step). */
export interface RequestStep {
  kind?: 'request';
  method?: string;
  path: string;
  /** An object (sent as JSON unless `contentType` says YAML), a string or a Buffer sent as is. */
  body?: unknown;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  as?: Identity;
  /** Save values from the JSON answer: variable name → dotted path (`metadata.resourceVersion`). */
  save?: Record<string, string>;
  compare?: CompareMode;
  /** Compare only this dotted path of the JSON answer (a large document's part that concerns the suite). */
  pick?: string;
  /** Repeat (bounded) until the answer has this status; the last answer counts. For asynchronous controllers. */
  until?: { status: number; timeoutMs?: number };
  /** Not part of the comparison (setup), but it must succeed (< 300). */
  setup?: boolean;
}

/** Open a watch stream (its events are read by a later {@link WatchReadStep}). */
export interface WatchOpenStep {
  kind: 'watch';
  id: string;
  path: string;
  as?: Identity;
}

/** Read a watch: until `events` events (not counting periodic BOOKMARKs) or the stream ends. */
export interface WatchReadStep {
  kind: 'read';
  id: string;
  /** Stop after this many events; omit to read until the server ends the stream. */
  events?: number;
  /** A bound on the wait (a failure bound, not synchronisation). Default 10 s. */
  timeoutMs?: number;
  /** Close the stream after reading. Default true. */
  close?: boolean;
}

export type Step = RequestStep | WatchOpenStep | WatchReadStep;

/** A scripted sequence, run in a fresh namespace (`{{ns}}`) on each server. */
export interface Scenario {
  /** Stable id: `area/what`, used by the fixture and the known-differences file. */
  id: string;
  steps: Step[];
  /** Skip creating the fresh namespace (cluster-scoped scenarios that need none). */
  noNamespace?: boolean;
}

/** One step's normalised answer. */
export interface StepResult {
  step: number;
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
  events?: unknown[];
  /** How a watch read ended: the count was reached, the server closed, or the bound expired. */
  end?: 'count' | 'closed' | 'timeout';
  outcome?: 'accepted' | 'refused';
  error?: string;
}

/** A scenario's normalised answers on one server. */
export interface Transcript {
  id: string;
  results: StepResult[];
}

/**
 * Dry-run policies (issue 21 item 4, ADR 0050): `spec.enforcement: DryRun` on an InferencePolicy or
 * a ToolPolicy makes it recorded, never enforced. How a dry-run policy reaches a sandbox, and how a
 * router echoes it, shared by the compiler, the router and the controller so the three cannot drift:
 *
 * - A sandbox's reference (`spec.inferenceRef`, `spec.governance.toolPolicyRef`) names the one
 *   policy of each kind it **enforces**. A dry-run policy is never enforced: a router refuses (NACKs)
 *   a referenced policy whose compiled body says DryRun, and keeps enforcing what it had.
 * - A dry-run policy reaches every sandbox of its namespace that its `appliesTo` selects
 *   ({@link dryRunSelects}), beside the policy the sandbox enforces.
 * - A router echoes each dry-run policy it records under a slot `<Kind>/<name>` ({@link dryRunSlot})
 *   in the lease annotation {@link DRY_RUN_ANNOTATION}: the digest it records, the last error, the
 *   digest it refused, as for the enforced kinds.
 */
import type { EchoKind } from './echo.js';

/** `spec.enforcement`: `Enforce` (absent means Enforce) or `DryRun`. */
export type EnforcementMode = 'Enforce' | 'DryRun';

/** The modes, in the CRD's enum order. */
export const ENFORCEMENT_MODES: readonly EnforcementMode[] = ['Enforce', 'DryRun'];

/** The mode a spec asks for: DryRun only when it says exactly `DryRun`. */
export function enforcementModeOf(spec: { enforcement?: unknown } | undefined): EnforcementMode {
  return spec?.enforcement === 'DryRun' ? 'DryRun' : 'Enforce';
}

/** A dry-run policy's selector: `sandboxName` (InferencePolicy only; empty or absent: any) AND `sandboxMatchLabels`. */
export interface DryRunSelector {
  sandboxName?: string | null | undefined;
  sandboxMatchLabels?: Readonly<Record<string, string>> | null | undefined;
}

/**
 * Whether a dry-run policy with selector `appliesTo` reaches `sandbox` (same namespace assumed): its
 * `sandboxName` is empty or the sandbox's name, and every `sandboxMatchLabels` pair is a label of
 * the sandbox. No selector at all selects every sandbox. Pure.
 */
export function dryRunSelects(
  appliesTo: DryRunSelector | null | undefined,
  sandbox: { metadata: { name?: string | undefined; labels?: Readonly<Record<string, string>> | undefined } },
): boolean {
  const name = appliesTo?.sandboxName;
  if (typeof name === 'string' && name !== '' && name !== sandbox.metadata.name) return false;
  const labels = sandbox.metadata.labels ?? {};
  for (const [k, v] of Object.entries(appliesTo?.sandboxMatchLabels ?? {})) if (labels[k] !== v) return false;
  return true;
}

/**
 * Whether a DryRun policy of `kind` with selector `appliesTo` reaches `sandbox`: the one rule the
 * router, the controller and the CLI apply. A ToolPolicy selects by `sandboxMatchLabels` only (its
 * `appliesTo` has no `sandboxName`; one written there anyway is ignored, as the router ignores it).
 */
export function dryRunReaches(
  kind: 'InferencePolicy' | 'ToolPolicy',
  appliesTo: DryRunSelector | null | undefined,
  sandbox: Parameters<typeof dryRunSelects>[1],
): boolean {
  return dryRunSelects(kind === 'InferencePolicy' ? appliesTo : { sandboxMatchLabels: appliesTo?.sandboxMatchLabels }, sandbox);
}

/** The echo kinds a dry-run policy is recorded under. */
export type DryRunKind = Extract<EchoKind, 'InferencePolicy' | 'ToolPolicy' | 'AgtProfile'>;

/** The slot of a dry-run policy in the echo: `<Kind>/<name>`, e.g. `ToolPolicy/stricter`. */
export function dryRunSlot(kind: DryRunKind, name: string): string {
  return `${kind}/${name}`;
}

/** Lease annotation (kars addition, ADR 0050): JSON `{digests, errors, rejected}`, each keyed by {@link dryRunSlot}. */
export const DRY_RUN_ANNOTATION = 'kars.azure.com/dry-run';

/** What a router echoes of the dry-run policies it records, keyed by slot. */
export interface DryRunEcho {
  digests: Record<string, string | null>;
  errors: Record<string, string>;
  rejected: Record<string, string>;
}

/** An echo with no dry-run policy. */
export function emptyDryRunEcho(): DryRunEcho {
  return { digests: {}, errors: {}, rejected: {} };
}

/**
 * The refusal a router gives a referenced policy whose compiled body says DryRun: the reference is
 * the policy the sandbox enforces, and a dry-run policy is never enforced (ADR 0050).
 */
export function dryRunReferencedError(kind: 'InferencePolicy' | 'ToolPolicy', name: string): string {
  const ref = kind === 'InferencePolicy' ? 'spec.inferenceRef' : 'spec.governance.toolPolicyRef';
  return (
    `enforcement: the sandbox's ${ref} names ${kind} ${name}, which is DryRun: a reference names the policy the sandbox enforces, ` +
    `and a dry-run policy is only recorded (it reaches sandboxes through appliesTo); the router keeps enforcing what it had. ` +
    `Set enforcement: Enforce, or reference another policy`
  );
}

/** The content-safety block as a spec or a compiled body holds it (absent fields: undefined or null). */
export interface ContentSafetyFloor {
  hate?: string | null | undefined;
  selfHarm?: string | null | undefined;
  sexual?: string | null | undefined;
  violence?: string | null | undefined;
  requirePromptShields?: boolean | null | undefined;
}

/** Whether a content-safety floor does anything: a severity ceiling is set, or Prompt Shields are required. */
export function contentSafetyFloorActive(cs: ContentSafetyFloor | null | undefined): boolean {
  return (
    cs != null && (cs.hate != null || cs.selfHarm != null || cs.sexual != null || cs.violence != null || cs.requirePromptShields === true)
  );
}

/** A field a DryRun policy may not hold, and why. */
export interface UnrecordedField {
  field: string;
  message: string;
}

/**
 * For a DryRun InferencePolicy (spec or compiled body), the first answer-side field it cannot hold;
 * undefined for an enforced one or one without such a field. A router judges a dry-run policy on the request only: the content-safety
 * floor and an output guardrail stage judge the answer, which a dry-run never holds back, so their
 * would-be verdicts are never reached. Accepting them would let `Ready` (RouterRecording) claim a
 * record the router never writes; the compiler, client-side validation and the router refuse them.
 */
export function dryRunUnrecordedField(spec: {
  enforcement?: unknown;
  contentSafety?: ContentSafetyFloor | null | undefined;
  guardrails?: ReadonlyArray<{ applyTo?: string | null | undefined }> | null | undefined;
}): UnrecordedField | undefined {
  if (enforcementModeOf(spec) !== 'DryRun') return undefined;
  if (contentSafetyFloorActive(spec.contentSafety))
    return {
      field: 'spec.contentSafety',
      message:
        'a DryRun policy cannot hold a content-safety floor: the floor judges the answer, and a router records a dry-run policy ' +
        'on the request only (ADR 0050); enforce the policy, or dry-run it without contentSafety',
    };
  const stages = Array.isArray(spec.guardrails) ? spec.guardrails : [];
  const i = stages.findIndex((g) => g?.applyTo !== 'input');
  if (i >= 0)
    return {
      field: `spec.guardrails[${i}].applyTo`,
      message:
        `a DryRun policy's guardrail stages must say applyTo: input (got ${JSON.stringify(stages[i]?.applyTo ?? null)}; absent means both): ` +
        'an output stage judges the answer, and a router records a dry-run policy on the request only (ADR 0050)',
    };
  return undefined;
}

/**
 * The one egress rule (ADR 0045; issue 9 item 5, issue 22 item 3): which hosts an EgressApproval
 * may open, and which addresses the router's proxy may connect to. The controller's check
 * (validation, so a bad approval is Degraded with the reason and never Active) and the router's
 * proxy (`allow.ts`, `proxy.ts`) both call these functions, so an approval is `Active` exactly when
 * the router admits it; the one thing the status cannot foresee is what DNS answers at connect time.
 *
 * The rule judges the **host as written**, in canonical form ({@link canonicalHost}), never a DNS
 * answer: the controller must decide without resolving, and must reach the router's answer.
 *
 * An approval host is refused ({@link approvalHostProblem}) when it is
 * - a wildcard other than one leading `*.` label over a registrable domain: `*`, `*.com`, `*.co.uk`,
 *   `api.*.com`, `*foo.com` are refused, `*.example.com` is accepted;
 * - a special address: loopback, link-local (169.254.0.0/16, incl. the cloud metadata address
 *   169.254.169.254, and fe80::/10), private (10/8, 172.16/12, 192.168/16, fc00::/7), CGNAT
 *   (100.64/10), unspecified, multicast, reserved, documentation and benchmark ranges, and IPv6
 *   forms that embed IPv4 (IPv4-mapped `::ffff:a.b.c.d`, NAT64 64:ff9b::/96, 6to4 2002::/16);
 *   IPv4 is recognised in every spelling `inet_aton` accepts (`2130706433`, `0x7f.1`, `0177.0.0.1`,
 *   `127.1`), which is what the resolver would connect to;
 * - a special name: `localhost` and names below it, and the metadata names `metadata`,
 *   `metadata.google.internal`, `instance-data`;
 * - not a host at all (an IPv6 zone id such as `fe80::1%eth0`, an empty label, an IDNA error);
 * unless the sandbox's **baseline** (`spec.networkPolicy.allowedEndpoints`) lists that same host
 * (after canonicalisation; any port): the operator's explicit allowance of that host.
 *
 * At connect time the proxy resolves a name once and asks {@link resolvedAddressProblem} about each
 * address: a special address is used only when a baseline entry admitted the target, or the
 * baseline lists the name (the same allowance as above: the operator named that host, so its
 * addresses are the operator's choice), or the baseline lists the address. An ordinary name that
 * resolves only to special addresses (DNS rebinding towards loopback or metadata) is refused there,
 * with its own decision code: the only case where an Active approval's host is refused.
 *
 * Canonical form: case-folded and IDNA-mapped (`ＬＯＣＡＬＨＯＳＴ` and `lo\u00adcalhost` are
 * `localhost`, `bücher.de` is `xn--bcher-kva.de`), one trailing dot removed, IPv6 brackets removed
 * and compressed (RFC 5952), IPv4-mapped IPv6 as the IPv4 address, IPv4 in every spelling as the
 * dotted quad.
 *
 * Guarantees: pure, no I/O, never throws.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';

/** A host in canonical form: IPv4 dotted-quad, IPv6 compressed (RFC 5952) without brackets, names lower-case without a trailing dot. */
export type CanonicalHost =
  | { kind: 'ipv4'; host: string; value: number }
  | { kind: 'ipv6'; host: string; bytes: number[] }
  | { kind: 'name'; host: string }
  | { kind: 'wildcard'; host: string; base: string };

/** Parse an `inet_aton` spelling of IPv4 (1 to 4 parts; decimal, 0x hex or 0-leading octal). */
export function parseIpv4Loose(s: string): number | undefined {
  if (s === '' || s.length > 64) return undefined;
  const parts = s.split('.');
  if (parts.length > 4) return undefined;
  const nums: number[] = [];
  for (const p of parts) {
    let n: number;
    if (/^0[xX][0-9a-fA-F]*$/.test(p)) n = p.length === 2 ? 0 : parseInt(p.slice(2), 16);
    else if (/^0[0-7]+$/.test(p)) n = parseInt(p, 8);
    else if (/^(0|[1-9][0-9]*)$/.test(p)) n = Number(p);
    else return undefined;
    if (!Number.isFinite(n)) return undefined;
    nums.push(n);
  }
  const last = nums.pop() ?? 0;
  for (const n of nums) if (n > 255) return undefined;
  const rest = 4 - nums.length;
  if (last >= 2 ** (8 * rest)) return undefined;
  let v = 0;
  for (const n of nums) v = v * 256 + n;
  return v * 2 ** (8 * rest) + last;
}

function dotted(v: number): string {
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
}

/** The 16 bytes of an IPv6 literal (node's parser decides validity). */
function ipv6Bytes(s: string): number[] | undefined {
  if (!isIPv6(s)) return undefined;
  let head = s;
  let v4: number[] = [];
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    if (!isIPv4(tail)) return undefined;
    v4 = tail.split('.').map(Number);
    head = `${s.slice(0, lastColon + 1)}0:0`;
  }
  const [l, r] = head.includes('::') ? head.split('::') : [head, undefined];
  const left = l === '' || l === undefined ? [] : l.split(':');
  const right = r === undefined || r === '' ? [] : r.split(':');
  const fill = r === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...Array<string>(fill).fill('0'), ...right].map((g) => parseInt(g, 16));
  if (groups.length !== 8) return undefined;
  const bytes = groups.flatMap((g) => [g >> 8, g & 255]);
  if (v4.length === 4) bytes.splice(12, 4, ...v4);
  return bytes;
}

/** Canonical form of a host (see {@link CanonicalHost}); undefined when it is not a host at all. */
export function canonicalHost(raw: string): CanonicalHost | undefined {
  let h = raw.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  // Non-ASCII: the IDNA mapping the resolver (and the WHATWG URL parser) applies: full-width
  // letters, digits and dots, soft hyphens, zero-width characters. An IDNA error is not a host.
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(h)) {
    h = domainToASCII(h);
    if (h === '') return undefined;
  }
  if (h.endsWith('.') && h.length > 1) h = h.slice(0, -1);
  if (h === '') return undefined;
  // A zone id (`fe80::1%eth0`) names an interface of one machine: not a host a policy can name.
  if (h.includes('%')) return undefined;
  if (h.includes(':')) {
    const bytes = ipv6Bytes(h);
    if (bytes === undefined) return undefined;
    // An IPv4-mapped address is the IPv4 address.
    if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255) {
      const v = (bytes[12] ?? 0) * 2 ** 24 + ((bytes[13] ?? 0) << 16) + ((bytes[14] ?? 0) << 8) + (bytes[15] ?? 0);
      return { kind: 'ipv4', host: dotted(v), value: v };
    }
    // The WHATWG URL serialiser gives the RFC 5952 compressed form (`::1`, `fe80::1`).
    let host: string;
    try {
      host = new URL(`http://[${h}]/`).hostname.slice(1, -1);
    } catch {
      return undefined;
    }
    return { kind: 'ipv6', host, bytes };
  }
  const v4 = parseIpv4Loose(h);
  if (v4 !== undefined) return { kind: 'ipv4', host: dotted(v4), value: v4 };
  if (h.split('.').includes('')) return undefined;
  if (h.includes('*')) return { kind: 'wildcard', host: h, base: h.startsWith('*.') ? h.slice(2) : '' };
  return { kind: 'name', host: h };
}

const V4_SPECIAL: ReadonlyArray<[string, number, string]> = [
  ['0.0.0.0', 8, 'the unspecified/"this network" range 0.0.0.0/8'],
  ['10.0.0.0', 8, 'the private range 10.0.0.0/8'],
  ['100.64.0.0', 10, 'the carrier-grade NAT range 100.64.0.0/10'],
  ['127.0.0.0', 8, 'the loopback range 127.0.0.0/8'],
  ['169.254.0.0', 16, 'the link-local range 169.254.0.0/16 (cloud metadata lives at 169.254.169.254)'],
  ['172.16.0.0', 12, 'the private range 172.16.0.0/12'],
  ['192.0.0.0', 24, 'the IETF protocol range 192.0.0.0/24'],
  ['192.0.2.0', 24, 'a documentation range'],
  ['192.168.0.0', 16, 'the private range 192.168.0.0/16'],
  ['198.18.0.0', 15, 'the benchmarking range 198.18.0.0/15'],
  ['198.51.100.0', 24, 'a documentation range'],
  ['203.0.113.0', 24, 'a documentation range'],
  ['224.0.0.0', 4, 'the multicast range 224.0.0.0/4'],
  ['240.0.0.0', 4, 'the reserved range 240.0.0.0/4 (and broadcast)'],
];

function v4Special(v: number): string | undefined {
  for (const [base, bits, why] of V4_SPECIAL) {
    const b = parseIpv4Loose(base) ?? 0;
    const size = 2 ** (32 - bits);
    if (v >= b && v < b + size) return why;
  }
  return undefined;
}

function v6Special(bytes: number[]): string | undefined {
  const b0 = bytes[0] ?? 0;
  const b1 = bytes[1] ?? 0;
  if (bytes.slice(0, 15).every((b) => b === 0) && (bytes[15] === 0 || bytes[15] === 1))
    return bytes[15] === 1 ? 'the IPv6 loopback ::1' : 'the IPv6 unspecified address ::';
  if ((b0 & 0xfe) === 0xfc) return 'the IPv6 unique-local range fc00::/7';
  if (b0 === 0xfe && (b1 & 0xc0) === 0x80) return 'the IPv6 link-local range fe80::/10';
  if (b0 === 0xfe && (b1 & 0xc0) === 0xc0) return 'the IPv6 site-local range fec0::/10';
  if (b0 === 0xff) return 'the IPv6 multicast range ff00::/8';
  if (bytes.slice(0, 12).every((b) => b === 0)) return 'an IPv4-compatible IPv6 address ::/96';
  if (b0 === 0x00 && b1 === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b)
    return 'the NAT64 range 64:ff9b::/96 (it reaches IPv4 addresses)';
  if (b0 === 0x20 && b1 === 0x02) return 'the 6to4 range 2002::/16 (it reaches IPv4 addresses)';
  if (b0 === 0x20 && b1 === 0x01 && bytes[2] === 0x0d && bytes[3] === 0xb8) return 'the IPv6 documentation range 2001:db8::/32';
  if (b0 === 0x01 && b1 === 0x00 && bytes.slice(2, 8).every((b) => b === 0)) return 'the IPv6 discard range 100::/64';
  return undefined;
}

const SPECIAL_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'instance-data', 'instance-data.ec2.internal']);
/** Second-level labels under which a two-label suffix is a public suffix (co.uk, com.au, ...). */
const PUBLIC_SECOND_LEVEL = new Set([
  'co',
  'com',
  'net',
  'org',
  'gov',
  'edu',
  'ac',
  'or',
  'ne',
  'go',
  'gob',
  'mil',
  'nic',
  'ltd',
  'plc',
  'sch',
  'nom',
  'int',
]);

/** Why `host` is a special destination (a reason), or undefined for an ordinary public host. */
export function specialHostReason(host: string): string | undefined {
  const c = canonicalHost(host);
  if (c === undefined) return 'it is not a host name or address';
  if (c.kind === 'ipv4') {
    const why = v4Special(c.value);
    return why === undefined ? undefined : `${c.host} is in ${why}`;
  }
  if (c.kind === 'ipv6') {
    const why = v6Special(c.bytes);
    return why === undefined ? undefined : `${c.host} is in ${why}`;
  }
  if (c.kind === 'name') {
    if (SPECIAL_NAMES.has(c.host) || c.host.endsWith('.localhost')) return `${c.host} names the local machine or a metadata service`;
    return undefined;
  }
  return wildcardProblem(c.host);
}

/** Why a wildcard host is too wide, or undefined when it is one `*.` label over a registrable domain. */
function wildcardProblem(h: string): string | undefined {
  if (h === '*') return '"*" would allow every host';
  if (!h.startsWith('*.') || h.slice(2).includes('*'))
    return `"${h}" is not a wildcard the router supports: only one leading "*." label, as in *.example.com`;
  const labels = h.slice(2).split('.');
  if (labels.length < 2) return `"${h}" would allow a whole top-level domain`;
  if (labels.length === 2 && PUBLIC_SECOND_LEVEL.has(labels[0] ?? ''))
    return `"${h}" would allow a whole public suffix (.${labels.join('.')})`;
  if (labels.at(-1) === 'localhost' || labels.at(-1) === 'internal' || labels.at(-1) === 'local')
    return `"${h}" would allow internal names (.${labels.at(-1) ?? ''})`;
  return undefined;
}

/**
 * Why an EgressApproval may not open `host`, or undefined when it may. `baselineHosts` are the
 * sandbox's baseline endpoint hosts: a special name or address listed there (after
 * canonicalisation) is allowed. A too-wide or malformed wildcard is refused whatever the baseline
 * lists (a baseline wildcard is matched, never compared as a name: ADR 0045).
 */
export function approvalHostProblem(host: string, baselineHosts: readonly string[] = []): string | undefined {
  const why = specialHostReason(host);
  if (why === undefined) return undefined;
  if (canonicalHost(host)?.kind === 'wildcard') return why;
  if (baselineListsHost(host, baselineHosts)) return undefined;
  return `${why}; an approval may not open it unless the sandbox baseline (spec.networkPolicy.allowedEndpoints) lists that host`;
}

/** Does the baseline list `host` (canonical comparison, any port)? */
export function baselineListsHost(host: string, baselineHosts: readonly string[]): boolean {
  const c = canonicalHost(host);
  return c !== undefined && baselineHosts.some((b) => canonicalHost(b)?.host === c.host);
}

/**
 * At connect time: why the proxy may not connect to `address`, one of the addresses `name`
 * resolved to, or undefined when it may (see the module comment). `admittedByBaseline`: the entry
 * that admitted the target is a baseline entry. `baselineHosts`: the sandbox's baseline hosts.
 */
export function resolvedAddressProblem(
  name: string,
  address: string,
  opts: { admittedByBaseline: boolean; baselineHosts: readonly string[] },
): string | undefined {
  const why = specialHostReason(address);
  if (why === undefined || opts.admittedByBaseline) return undefined;
  if (baselineListsHost(name, opts.baselineHosts) || baselineListsHost(address, opts.baselineHosts)) return undefined;
  return why;
}

/** String formats kube-apiserver checks (the kube-openapi strfmt subset worth having). Unknown formats pass. */

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const UUID = /^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/;
const UUID_V = (v: string): RegExp =>
  new RegExp(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?${v}[0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}$`);
const HOSTNAME = /^(?=.{1,253}$)[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.?$/;
const IPV4 = /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const MAC = /^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/;
const EMAIL = /^[^\s@]+@[^\s@]+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DURATION = /^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$/;

function validDate(s: string): boolean {
  const [y, m, d] = s.slice(0, 10).split('-').map(Number) as [number, number, number];
  if (m < 1 || m > 12 || d < 1) return false;
  const days = new Date(Date.UTC(y, m, 0)).getUTCDate();
  return d <= days;
}

function ipv6(s: string): boolean {
  if (!/^[0-9a-fA-F:.]+$/.test(s) || s.length > 45) return false;
  try {
    return new URL(`http://[${s}]/`).hostname !== '';
  } catch {
    return false;
  }
}

const CHECKS: Record<string, (s: string) => boolean> = {
  date: (s) => DATE.test(s) && validDate(s),
  'date-time': (s) => DATE_TIME.test(s) && validDate(s),
  datetime: (s) => DATE_TIME.test(s) && validDate(s),
  uuid: (s) => UUID.test(s),
  uuid3: (s) => UUID_V('3').test(s),
  uuid4: (s) => UUID_V('4').test(s),
  uuid5: (s) => UUID_V('5').test(s),
  hostname: (s) => HOSTNAME.test(s),
  ipv4: (s) => IPV4.test(s),
  ipv6,
  cidr: (s) => {
    const slash = s.lastIndexOf('/');
    if (slash < 0) return false;
    const ip = s.slice(0, slash);
    const bits = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(bits)) return false;
    if (IPV4.test(ip)) return Number(bits) <= 32;
    return ipv6(ip) && Number(bits) <= 128;
  },
  mac: (s) => MAC.test(s),
  email: (s) => EMAIL.test(s),
  byte: (s) => s.length % 4 === 0 && BASE64.test(s),
  duration: (s) => s === '0' || DURATION.test(s),
  uri: (s) => {
    try {
      return new URL(s).protocol !== '';
    } catch {
      return false;
    }
  },
};

/** True when s satisfies format (or the format is not one kube checks). */
export function checkFormat(format: string, s: string): boolean {
  const check = CHECKS[format];
  if (check === undefined || s.length > 100_000) return true;
  return check(s);
}

/** kube field.Path rendering: child "a.b", index "a[0]", key "a[k]". */

export function child(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

export function index(path: string, i: number): string {
  return `${path}[${i}]`;
}

export function key(path: string, k: string): string {
  return `${path}[${k}]`;
}

/** Append a rule's relative fieldPath (".a.b", "['x.y']", "[0]") to a node path. */
export function appendFieldPath(path: string, fieldPath: string): string {
  let out = path;
  const re = /\.([^.[\]]+)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*(\d+)\s*\]/gy;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(fieldPath)) !== null) {
    last = re.lastIndex;
    if (m[1] !== undefined) out = child(out, m[1]);
    else if (m[2] !== undefined) out = key(out, m[2].replace(/\\(.)/g, '$1'));
    else if (m[3] !== undefined) out = key(out, m[3].replace(/\\(.)/g, '$1'));
    else if (m[4] !== undefined) out = index(out, Number(m[4]));
  }
  if (last !== fieldPath.length) return fieldPath.startsWith('.') || path === '' ? out : `${path}${fieldPath}`;
  return out;
}

/** True when fieldPath is a syntactically valid relative JSON path as kube accepts it. */
export function isValidFieldPath(fieldPath: string): boolean {
  if (fieldPath === '') return false;
  const re = /\.([^.[\]]+)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*(\d+)\s*\]/gy;
  let last = 0;
  while (re.exec(fieldPath) !== null) last = re.lastIndex;
  return last === fieldPath.length;
}

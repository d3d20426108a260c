import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from './errors.js';
import { formatFieldSelector, formatLabelSelector, parseFieldSelector, parseLabelSelector, type LabelRequirement } from './selectors.js';

const LONG = 'a'.repeat(11999);
const LABEL_VALUE_HINT =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const NAME_HINT =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

function message(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof ApiError, `not an ApiError: ${String(e)}`);
    assert.equal(e.code, 400);
    return e.message;
  }
  assert.fail('did not throw');
}

describe('label selectors as kube-apiserver parses them (issue 25 item 6)', () => {
  for (const [sel, msg] of [
    [`app=${LONG}!`, `unable to parse requirement: values[0][app]: Invalid value: "${LONG}": must be no more than 63 characters`],
    ['app=a!b', "found '!', expected: ',' or 'end of string'"],
    ['app=-x', `unable to parse requirement: values[0][app]: Invalid value: "-x": ${LABEL_VALUE_HINT}`],
    [
      `app=-${'x'.repeat(70)}`,
      `unable to parse requirement: values[0][app]: Invalid value: "-${'x'.repeat(70)}": must be no more than 63 characters; ${LABEL_VALUE_HINT}`,
    ],
    ['app in (b,-a)', `unable to parse requirement: values[0][app]: Invalid value: "-a": ${LABEL_VALUE_HINT}`],
    [
      'app in (-b,-a)',
      `unable to parse requirement: [values[0][app]: Invalid value: "-a": ${LABEL_VALUE_HINT}, values[1][app]: Invalid value: "-b": ${LABEL_VALUE_HINT}]`,
    ],
    ['-bad', `unable to parse requirement: <nil>: Invalid value: "-bad": ${NAME_HINT}`],
    [
      'a/b/c',
      `unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ],
    ['/x', 'unable to parse requirement: <nil>: Invalid value: "/x": prefix part must be non-empty'],
    ['app gt 1', "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt"],
    ['n>x', `unable to parse requirement: values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer`],
    ['app in a', "unable to parse requirement: found 'a' expected: '('"],
    ['app in (a', "unable to parse requirement: found '', expected: ',' or ')'"],
    [',a', "found ',', expected: !, identifier, or 'end of string'"],
    ['a,', "found '', expected: identifier after ','"],
    ['a=b=c', "found '=', expected: ',' or 'end of string'"],
    ['a="b"', `unable to parse requirement: values[0][a]: Invalid value: "\\"b\\"": ${LABEL_VALUE_HINT}`],
  ] as const) {
    it(`${sel.length > 40 ? `${sel.slice(0, 40)}…` : sel} → 400 with kube's message`, () => {
      assert.equal(
        message(() => parseLabelSelector(sel)),
        msg,
      );
    });
  }

  it('accepts what kube accepts', () => {
    assert.deepEqual(parseLabelSelector('x in (foo,,baz),y,z notin ()'), [
      { key: 'x', op: 'in', values: ['', 'baz', 'foo'] },
      { key: 'y', op: 'exists', values: [] },
      { key: 'z', op: 'notin', values: [''] },
    ]);
    assert.deepEqual(parseLabelSelector('a==b, !c,example.com/d!=,in in (in,notin),n>3'), [
      { key: 'a', op: '=', values: ['b'] },
      { key: 'c', op: '!', values: [] },
      { key: 'example.com/d', op: '!=', values: [''] },
      { key: 'in', op: 'in', values: ['in', 'notin'] },
      { key: 'n', op: 'gt', values: ['3'] },
    ]);
    assert.deepEqual(parseLabelSelector(''), []);
  });

  it('property: any text parses or throws a 400 ApiError, nothing else', () => {
    const ch = fc.constantFrom(
      'a',
      'B',
      '0',
      '-',
      '_',
      '.',
      '/',
      '=',
      '!',
      '(',
      ')',
      ',',
      '<',
      '>',
      ' ',
      '\t',
      '\n',
      'in',
      'notin',
      'é',
      '\u0000',
      '"',
      '\\',
      '😀',
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.array(ch, { maxLength: 30 }).map((a) => a.join('')),
          fc.string({ unit: 'binary' }),
        ),
        (s) => {
          try {
            parseLabelSelector(s);
          } catch (e) {
            return e instanceof ApiError && e.code === 400 && e.reason === 'BadRequest';
          }
          return true;
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('property: a valid selector round-trips through its string form', () => {
    const seg = fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/);
    const key = fc.oneof(
      seg,
      fc.tuple(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}$/), seg).map(([p, n]) => `${p}/${n}`),
    );
    const value = fc.oneof(fc.constant(''), seg);
    const req = fc.oneof(
      fc.record({ key, op: fc.constantFrom('=' as const, '!=' as const), values: value.map((v) => [v]) }),
      fc.record({
        key,
        op: fc.constantFrom('in' as const, 'notin' as const),
        values: fc.uniqueArray(value, { minLength: 1, maxLength: 4 }),
      }),
      fc.record({ key, op: fc.constantFrom('exists' as const, '!' as const), values: fc.constant([]) }),
      fc.record({
        key,
        op: fc.constantFrom('gt' as const, 'lt' as const),
        values: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }).map((n) => [String(n)]),
      }),
    );
    fc.assert(
      fc.property(fc.array(req, { maxLength: 5 }), (sel) => {
        const norm: LabelRequirement[] = sel.map((r) => ({
          ...r,
          values: [...r.values].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
        }));
        assert.deepEqual(parseLabelSelector(formatLabelSelector(norm)), norm);
      }),
    );
  });
});

describe('field selectors as kube-apiserver parses them', () => {
  for (const [sel, msg] of [
    ['metadata.name', "invalid selector: 'metadata.name'; can't understand 'metadata.name'"],
    ['a=b,c', "invalid selector: 'a=b,c'; can't understand 'c'"],
    ['a=b\\x', 'invalid field selector: invalid escape sequence: \\x'],
    ['a=b\\', 'invalid field selector: invalid escape sequence: \\'],
    ['a==b=c', 'invalid field selector: unescaped character in value: 61'],
  ] as const) {
    it(`${sel} → 400 with kube's message`, () =>
      assert.equal(
        message(() => parseFieldSelector(sel)),
        msg,
      ));
  }

  it('splits at the first operator, does not trim, unescapes the value, skips empty terms', () => {
    assert.deepEqual(parseFieldSelector('a!=b,,c==d, e = f ,g=h\\,i\\=j\\\\'), [
      { field: 'a', op: '!=', value: 'b' },
      { field: 'c', op: '=', value: 'd' },
      { field: ' e ', op: '=', value: ' f ' },
      { field: 'g', op: '=', value: 'h,i=j\\' },
    ]);
  });

  it('property: any text parses or throws a 400 ApiError; escaped values round-trip', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        try {
          parseFieldSelector(s);
        } catch (e) {
          return e instanceof ApiError && e.code === 400;
        }
        return true;
      }),
      { numRuns: 3000 },
    );
    const field = fc.stringMatching(/^[a-z][a-z.]{0,12}$/);
    fc.assert(
      fc.property(
        fc.array(fc.record({ field, op: fc.constantFrom('=' as const, '!=' as const), value: fc.string({ unit: 'binary' }) }), {
          maxLength: 4,
        }),
        (reqs) => {
          assert.deepEqual(
            parseFieldSelector(formatFieldSelector(reqs)),
            reqs.map((r) => ({ ...r })),
          );
        },
      ),
    );
  });
});

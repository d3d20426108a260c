// Regression tests for request body decoding, each asserting kube-apiserver v1.34's answer (found by the
// differential suite, packages/kube-envtest/src/differential): Go's JSON error wording, the request media
// types, duplicate and unknown metadata fields under fieldValidation, and the annotation size limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createCrds, startTestServer, warningTexts, widgetCrd } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';
import { goQuoteByte, scanGoJson } from './http/go-json.js';

const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';
const FIND_KIND = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }';
const UNSUPPORTED =
  'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf';

/** The Go error scanGoJson reports for `text`. */
const goError = (text: string): string | undefined => scanGoJson(Buffer.from(text, 'latin1')).error;

describe('Go JSON scanner', () => {
  it('accepts exactly what JSON.parse accepts', () => {
    const accepts = (s: string): boolean => {
      try {
        JSON.parse(s);
        return true;
      } catch {
        return false;
      }
    };
    const agree = (s: string): void => assert.equal(scanGoJson(Buffer.from(s, 'utf8')).error === undefined, accepts(s), s);
    fc.assert(fc.property(fc.json(), agree), { numRuns: 500 });
    // Valid JSON with one character dropped, changed or inserted: mostly invalid, sometimes not.
    const mutated = fc
      .tuple(
        fc.json(),
        fc.nat(),
        fc.constantFrom('', ' ', '"', '\\', ',', ':', '{', '}', '[', ']', '0', '-', '.', 'e', 't', 'x', '\u0001'),
        fc.boolean(),
      )
      .map(([j, at, ch, replace]) => {
        const i = at % (j.length + 1);
        return j.slice(0, i) + ch + j.slice(replace ? i + 1 : i);
      });
    fc.assert(fc.property(mutated, agree), { numRuns: 3000 });
    fc.assert(fc.property(fc.string(), agree), { numRuns: 1000 });
  });

  it("words its errors as Go's encoding/json", () => {
    assert.equal(goError('{"a":1,'), 'unexpected end of JSON input');
    assert.equal(goError(''), 'unexpected end of JSON input');
    assert.equal(goError('x'), "invalid character 'x' looking for beginning of value");
    assert.equal(goError('{"a" 1}'), "invalid character '1' after object key");
    assert.equal(goError('{"a":1 "b"}'), `invalid character '"' after object key:value pair`);
    assert.equal(goError('[1 2]'), "invalid character '2' after array element");
    assert.equal(goError('{,}'), "invalid character ',' looking for beginning of object key string");
    assert.equal(goError('[1,]'), "invalid character ']' looking for beginning of value");
    assert.equal(goError('01'), "invalid character '1' after top-level value");
    assert.equal(goError('1.'), "invalid character ' ' after decimal point in numeric literal");
    assert.equal(goError('1ex'), "invalid character 'x' in exponent of numeric literal");
    assert.equal(goError('-'), "invalid character ' ' in numeric literal");
    assert.equal(goError('tru'), "invalid character ' ' in literal true (expecting 'e')");
    assert.equal(goError('nul!'), "invalid character '!' in literal null (expecting 'l')");
    assert.equal(goError('"a\\q"'), "invalid character 'q' in string escape code");
    assert.equal(goError('"\\u12g4"'), "invalid character 'g' in \\u hexadecimal character escape");
    assert.equal(goError('"a\nb"'), "invalid character '\\n' in string literal");
    assert.equal(goError("'a'"), "invalid character '\\'' looking for beginning of value");
    assert.equal(goError('\x9e'), "invalid character '\\u009e' looking for beginning of value");
    assert.equal(goError('['.repeat(10_001)), "invalid character '[' exceeded max depth");
    assert.equal(goQuoteByte(0), "'\\x00'");
    assert.equal(goQuoteByte(0xe9), "'é'");
  });

  it('finds repeated keys with the strict decoder paths, each once, and numbers beyond float64', () => {
    const s = scanGoJson(Buffer.from('{"a":1,"a":2,"a":3,"c":{"c":1,"c":2},"e":[{"g":1,"g":1}],"n":1e400}'));
    assert.deepEqual(s.duplicates, ['a', 'c.c', 'e[0].g']);
    assert.equal(s.overflow, '1e400');
    assert.deepEqual(scanGoJson(Buffer.from('[{"a\\u0062":1,"ab":2}]')).duplicates, ['[0].ab']);
    assert.equal(scanGoJson(Buffer.from('{"a":1e300}')).overflow, undefined);
  });
});

describe('kube-apiserver parity: request body decoding', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it("refuses malformed JSON and a body that is not an object with Go's errors, as kube's create handler wraps them", async () => {
    const cut = await ts.client.post(CM, '{"apiVersion":"v1","kind":"ConfigMap",');
    assert.equal(cut.status, 400, cut.text);
    assert.equal(
      cut.body.message,
      'the object provided is unrecognized (must be of type ConfigMap): couldn\'t get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1","kind":"Con ...)',
    );
    const array = await ts.client.post(CM, '[1,2,3]');
    assert.equal(array.status, 400, array.text);
    assert.equal(array.body.reason, 'BadRequest');
    assert.equal(
      array.body.message,
      `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type ${FIND_KIND} (5b312c322c335d)`,
    );
  });

  it("refuses a JSON patch that is not a list in the words of kube's patch handler", async () => {
    assert.equal((await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'p' } })).status, 201);
    const r = await ts.client.patch(`${CM}/p`, '{"op":"add"}', 'json');
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.message, 'error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp');
    const syntax = await ts.client.patch(`${CM}/p`, '{"data":', 'merge');
    assert.equal(syntax.body.message, 'error decoding patch: unexpected end of JSON input');
  });

  it('refuses a continue token that is not base64 JSON as kube does', async () => {
    const r = await ts.client.get(`${CM}?limit=2&continue=not-a-token`);
    assert.equal(r.status, 400, r.text);
    assert.equal(
      r.body.message,
      "invalid continue token: continue key is not valid: invalid character '\\u009e' looking for beginning of value",
    );
    const b64 = await ts.client.get(`${CM}?limit=2&continue=ab%3D`);
    assert.equal(b64.body.message, 'invalid continue token: continue key is not valid: illegal base64 data at input byte 2');
  });

  it('refuses a body of a media type kube does not decode with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const r = await ts.client.request('POST', CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t"}}', {
        'content-type': type,
      });
      assert.equal(r.status, 415, r.text);
      assert.equal(r.body.reason, 'UnsupportedMediaType');
      assert.equal(r.body.message, UNSUPPORTED);
    }
    const charset = await ts.client.request('POST', CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t"}}', {
      'content-type': 'application/json; charset=utf-8',
    });
    assert.equal(charset.status, 201, charset.text);
  });

  it('judges a repeated key by fieldValidation: Strict refuses it, Warn warns', async () => {
    const twice = (name: string): string =>
      `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"${name}"},"spec":{"size":1,"size":2}}`;
    const strict = await ts.client.post(`${WD}?fieldValidation=Strict`, twice('s'));
    assert.equal(strict.status, 400, strict.text);
    assert.equal(
      strict.body.message,
      'Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.size"',
    );
    const warn = await ts.client.post(`${WD}?fieldValidation=Warn`, twice('w'));
    assert.equal(warn.status, 201, warn.text);
    assert.deepEqual(warningTexts(warn.headers['warning']), ['duplicate field "spec.size"']);
    assert.equal(warn.body.spec.size, 2);
  });

  it("drops a custom resource's unknown metadata fields, and refuses them under Strict", async () => {
    const body = (name: string): unknown => ({
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name, bogusMeta: 1 },
      spec: { size: 1 },
    });
    const strict = await ts.client.post(`${WD}?fieldValidation=Strict`, body('m'));
    assert.equal(strict.status, 400, strict.text);
    assert.equal(
      strict.body.message,
      'Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "metadata.bogusMeta"',
    );
    const warn = await ts.client.post(WD, body('m'));
    assert.equal(warn.status, 201, warn.text);
    assert.deepEqual(warningTexts(warn.headers['warning']), ['unknown field "metadata.bogusMeta"']);
    assert.equal(warn.body.metadata.bogusMeta, undefined);
  });

  it('refuses annotations over 256 KiB in total, and a number beyond float64', async () => {
    const big = await ts.client.post(CM, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ann', annotations: { a: 'x'.repeat(256 * 1024) } },
    });
    assert.equal(big.status, 422, big.text);
    assert.deepEqual(big.body.details.causes, [
      { reason: 'FieldValueTooLong', field: 'metadata.annotations', message: 'Too long: may not be more than 262144 bytes' },
    ]);
    const fits = await ts.client.post(CM, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ann', annotations: { a: 'x'.repeat(256 * 1024 - 1) } },
    });
    assert.equal(fits.status, 201, fits.text);
    const huge = await ts.client.post(CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"num","generation":1e400}}');
    assert.equal(huge.status, 400, huge.text);
  });
});

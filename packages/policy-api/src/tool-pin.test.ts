/**
 * The canonical digest of a tool definition (ADR 0043): a known vector, then properties over random
 * JSON: the order of keys never matters; any change to the name, the description or the input schema
 * changes the digest; members other than those three do not count.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { canonicalJson, isToolDigest, toolDefinitionCanonical, toolDefinitionDigest } from './tool-pin.js';

/** The same JSON value with every object's keys in reverse order (arrays keep their order). */
function reorder(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reorder);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(v).reverse()) out[k] = reorder((v as Record<string, unknown>)[k]);
  return out;
}

/** JSON values as JSON.parse returns them (no -0, no undefined). */
const json = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown);
const tool = fc.record(
  { name: fc.string({ minLength: 1 }), description: fc.string(), inputSchema: fc.dictionary(fc.string(), json) },
  { requiredKeys: ['name'] },
);

describe('toolDefinitionDigest', () => {
  it('is sha256 over the RFC 8785 form of {name, description, inputSchema}: a fixed vector', () => {
    const t = {
      name: 'read_file',
      description: 'Read a file',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      title: 'ignored',
    };
    const canonical =
      '{"description":"Read a file","inputSchema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"name":"read_file"}';
    assert.equal(toolDefinitionCanonical(t), canonical);
    assert.equal(toolDefinitionDigest(t), `sha256:${createHash('sha256').update(canonical).digest('hex')}`);
    assert.ok(isToolDigest(toolDefinitionDigest(t)));
  });

  it('sorts keys by UTF-16 code units and writes numbers and strings as JSON.stringify does (RFC 8785)', () => {
    assert.equal(
      canonicalJson({ b: 1, a: [1e21, 0.1, -0, 'é\u2028'], A: null, '\u{1F600}': 1, '\uffff': 2 }),
      '{"A":null,"a":[1e+21,0.1,0,"é\u2028"],"b":1,"\u{1F600}":1,"\uffff":2}',
    );
  });

  it('distinguishes an absent member from null and from an empty string', () => {
    const d = new Set([
      toolDefinitionDigest({ name: 'x' }),
      toolDefinitionDigest({ name: 'x', description: '' }),
      toolDefinitionDigest({ name: 'x', description: null }),
      toolDefinitionDigest({ name: 'x', inputSchema: {} }),
    ]);
    assert.equal(d.size, 4);
  });

  it('treats __proto__ and constructor keys in a schema as ordinary keys', () => {
    const parsed = JSON.parse('{"name":"x","inputSchema":{"__proto__":{"polluted":true},"constructor":1}}') as Record<string, unknown>;
    assert.equal(toolDefinitionCanonical(parsed), '{"inputSchema":{"__proto__":{"polluted":true},"constructor":1},"name":"x"}');
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  it('property: the order of keys, at any depth, does not change the digest', () => {
    fc.assert(
      fc.property(tool, (t) => {
        assert.equal(toolDefinitionDigest(reorder(t) as Record<string, unknown>), toolDefinitionDigest(t));
      }),
      { numRuns: 300 },
    );
  });

  it('property: any change to the name, the description or the schema changes the digest', () => {
    fc.assert(
      fc.property(tool, fc.string({ minLength: 1 }), json, fc.string(), (t, extra, value, key) => {
        const d = toolDefinitionDigest(t);
        assert.notEqual(toolDefinitionDigest({ ...t, name: `${t.name}${extra}` }), d, 'name');
        assert.notEqual(toolDefinitionDigest({ ...t, description: `${t.description ?? ''}${extra}` }), d, 'description');
        const schema = (t.inputSchema ?? {}) as Record<string, unknown>;
        // A key added (or one whose value is replaced by a different value).
        const changed = Object.prototype.hasOwnProperty.call(schema, key)
          ? JSON.stringify(schema[key]) === JSON.stringify([value])
            ? { ...schema, [key]: [value, value] }
            : { ...schema, [key]: [value] }
          : { ...schema, [key]: value };
        assert.notEqual(toolDefinitionDigest({ ...t, inputSchema: changed }), d, 'schema');
      }),
      { numRuns: 300 },
    );
  });

  it('property: members other than name, description and inputSchema do not count', () => {
    fc.assert(
      fc.property(tool, json, json, (t, title, annotations) => {
        assert.equal(toolDefinitionDigest({ ...t, title, annotations }), toolDefinitionDigest(t));
      }),
      { numRuns: 100 },
    );
  });

  it('property: canonicalJson is JSON that parses back to the same value', () => {
    fc.assert(
      fc.property(json, (v) => {
        assert.deepEqual(JSON.parse(canonicalJson(v)), v);
      }),
      { numRuns: 300 },
    );
  });
});

import { isObject } from '@kars/kube-core';
import protobuf from 'protobufjs';

/**
 * Encoding of a Swagger 2.0 JSON document as gnostic's OpenAPIv2 `Document` protobuf, the form
 * kube-apiserver serves at /openapi/v2 to `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
 *
 * The messages below are the subset of github.com/google/gnostic-models openapiv2/OpenAPIv2.proto
 * (package openapi.v2, proto3) that a Kubernetes document uses, with the same field numbers and
 * types. Anything the subset leaves out (security, tags, headers, examples, xml, external docs,
 * form/header/path parameters) kars never puts in its documents. To extend it, copy the message
 * from OpenAPIv2.proto unchanged and teach {@link schemaMessage} or {@link operationMessage} the field.
 *
 * Vendor extensions (x-kubernetes-group-version-kind, ...) and `default`/`enum`/`example` values
 * are `Any { yaml }`; JSON text is valid YAML, and that is what kubectl's YAML parser reads.
 */
const OPENAPI_V2_PROTO = `
syntax = "proto3";
package openapi.v2;

message AdditionalPropertiesItem { oneof oneof { Schema schema = 1; bool boolean = 2; } }
message Any { string yaml = 2; }
message BodyParameter { string description = 1; string name = 2; string in = 3; bool required = 4; Schema schema = 5; repeated NamedAny vendor_extension = 6; }
message Definitions { repeated NamedSchema additional_properties = 1; }
message Document {
  string swagger = 1; Info info = 2; string host = 3; string base_path = 4; repeated string schemes = 5;
  repeated string consumes = 6; repeated string produces = 7; Paths paths = 8; Definitions definitions = 9;
  repeated NamedAny vendor_extension = 16;
}
message Info { string title = 1; string version = 2; string description = 3; repeated NamedAny vendor_extension = 7; }
message ItemsItem { repeated Schema schema = 1; }
message JsonReference { string _ref = 1; string description = 2; }
message NamedAny { string name = 1; Any value = 2; }
message NamedPathItem { string name = 1; PathItem value = 2; }
message NamedResponseValue { string name = 1; ResponseValue value = 2; }
message NamedSchema { string name = 1; Schema value = 2; }
message NonBodyParameter { oneof oneof { QueryParameterSubSchema query_parameter_sub_schema = 3; } }
message Operation {
  repeated string tags = 1; string summary = 2; string description = 3; string operation_id = 5;
  repeated string produces = 6; repeated string consumes = 7; repeated ParametersItem parameters = 8;
  Responses responses = 9; repeated string schemes = 10; bool deprecated = 11; repeated NamedAny vendor_extension = 13;
}
message Parameter { oneof oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; } }
message ParametersItem { oneof oneof { Parameter parameter = 1; JsonReference json_reference = 2; } }
message PathItem {
  string _ref = 1; Operation get = 2; Operation put = 3; Operation post = 4; Operation delete = 5;
  Operation options = 6; Operation head = 7; Operation patch = 8; repeated ParametersItem parameters = 9;
  repeated NamedAny vendor_extension = 10;
}
message Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2; }
message Properties { repeated NamedSchema additional_properties = 1; }
message QueryParameterSubSchema {
  bool required = 1; string in = 2; string description = 3; string name = 4; bool allow_empty_value = 5;
  string type = 6; string format = 7; string collection_format = 9; bool unique_items = 20;
  repeated NamedAny vendor_extension = 23;
}
message Response { string description = 1; SchemaItem schema = 2; repeated NamedAny vendor_extension = 5; }
message ResponseValue { oneof oneof { Response response = 1; JsonReference json_reference = 2; } }
message Responses { repeated NamedResponseValue response_code = 1; repeated NamedAny vendor_extension = 2; }
message Schema {
  string _ref = 1; string format = 2; string title = 3; string description = 4; Any default = 5;
  double multiple_of = 6; double maximum = 7; bool exclusive_maximum = 8; double minimum = 9;
  bool exclusive_minimum = 10; int64 max_length = 11; int64 min_length = 12; string pattern = 13;
  int64 max_items = 14; int64 min_items = 15; bool unique_items = 16; int64 max_properties = 17;
  int64 min_properties = 18; repeated string required = 19; repeated Any enum = 20;
  AdditionalPropertiesItem additional_properties = 21; TypeItem type = 22; ItemsItem items = 23;
  repeated Schema all_of = 24; Properties properties = 25; string discriminator = 26; bool read_only = 27;
  Any example = 30; repeated NamedAny vendor_extension = 31;
}
message SchemaItem { oneof oneof { Schema schema = 1; } }
message TypeItem { repeated string value = 1; }
`;

let documentType: protobuf.Type | undefined;

function docType(): protobuf.Type {
  documentType ??= protobuf.parse(OPENAPI_V2_PROTO, { keepCase: true }).root.lookupType('openapi.v2.Document');
  return documentType;
}

type Msg = Record<string, unknown>;

function any(v: unknown): Msg {
  return { yaml: `${JSON.stringify(v)}\n` };
}

function extensions(obj: Record<string, unknown>): Msg[] {
  return Object.entries(obj)
    .filter(([k]) => k.startsWith('x-'))
    .map(([name, v]) => ({ name, value: any(v) }));
}

const NUMBERS: Record<string, string> = {
  multipleOf: 'multiple_of',
  maximum: 'maximum',
  minimum: 'minimum',
  maxLength: 'max_length',
  minLength: 'min_length',
  maxItems: 'max_items',
  minItems: 'min_items',
  maxProperties: 'max_properties',
  minProperties: 'min_properties',
};
const STRINGS: Record<string, string> = {
  $ref: '_ref',
  format: 'format',
  title: 'title',
  description: 'description',
  pattern: 'pattern',
  discriminator: 'discriminator',
};
const BOOLS: Record<string, string> = {
  exclusiveMaximum: 'exclusive_maximum',
  exclusiveMinimum: 'exclusive_minimum',
  uniqueItems: 'unique_items',
  readOnly: 'read_only',
};

/** A JSON schema (Swagger 2.0) as a gnostic Schema message. */
export function schemaMessage(s: unknown): Msg {
  if (!isObject(s)) return {};
  const m: Msg = {};
  for (const [k, v] of Object.entries(s)) {
    if (STRINGS[k] && typeof v === 'string') m[STRINGS[k]] = v;
    else if (NUMBERS[k] && typeof v === 'number') m[NUMBERS[k]] = v;
    else if (BOOLS[k] && typeof v === 'boolean') m[BOOLS[k]] = v;
  }
  if (s['default'] !== undefined) m['default'] = any(s['default']);
  if (s['example'] !== undefined) m['example'] = any(s['example']);
  if (Array.isArray(s['enum'])) m['enum'] = s['enum'].map(any);
  if (Array.isArray(s['required'])) m['required'] = s['required'].filter((x) => typeof x === 'string');
  if (typeof s['type'] === 'string') m['type'] = { value: [s['type']] };
  else if (Array.isArray(s['type'])) m['type'] = { value: s['type'].filter((x) => typeof x === 'string') };
  if (Array.isArray(s['items'])) m['items'] = { schema: s['items'].map(schemaMessage) };
  else if (isObject(s['items'])) m['items'] = { schema: [schemaMessage(s['items'])] };
  if (Array.isArray(s['allOf'])) m['all_of'] = s['allOf'].map(schemaMessage);
  if (isObject(s['properties']))
    m['properties'] = { additional_properties: Object.entries(s['properties']).map(([name, v]) => ({ name, value: schemaMessage(v) })) };
  if (typeof s['additionalProperties'] === 'boolean') m['additional_properties'] = { boolean: s['additionalProperties'] };
  else if (isObject(s['additionalProperties'])) m['additional_properties'] = { schema: schemaMessage(s['additionalProperties']) };
  const ext = extensions(s);
  if (ext.length > 0) m['vendor_extension'] = ext;
  return m;
}

function parameterMessage(p: unknown): Msg {
  if (!isObject(p)) return {};
  if (p['in'] === 'body') {
    return {
      parameter: {
        body_parameter: {
          name: p['name'],
          in: 'body',
          required: p['required'] === true,
          ...(p['description'] ? { description: p['description'] } : {}),
          schema: schemaMessage(p['schema']),
        },
      },
    };
  }
  const q: Msg = { name: p['name'], in: p['in'] };
  if (typeof p['type'] === 'string') q['type'] = p['type'];
  if (typeof p['description'] === 'string') q['description'] = p['description'];
  if (p['uniqueItems'] === true) q['unique_items'] = true;
  if (p['required'] === true) q['required'] = true;
  return { parameter: { non_body_parameter: { query_parameter_sub_schema: q } } };
}

/** A Swagger 2.0 operation as a gnostic Operation message. */
export function operationMessage(op: unknown): Msg {
  if (!isObject(op)) return {};
  const m: Msg = {};
  if (typeof op['operationId'] === 'string') m['operation_id'] = op['operationId'];
  if (typeof op['description'] === 'string') m['description'] = op['description'];
  if (Array.isArray(op['parameters'])) m['parameters'] = op['parameters'].map(parameterMessage);
  if (isObject(op['responses'])) {
    m['responses'] = {
      response_code: Object.entries(op['responses']).map(([code, r]) => {
        const rr = isObject(r) ? r : {};
        return {
          name: code,
          value: {
            response: {
              description: typeof rr['description'] === 'string' ? rr['description'] : '',
              ...(rr['schema'] ? { schema: { schema: schemaMessage(rr['schema']) } } : {}),
            },
          },
        };
      }),
    };
  }
  const ext = extensions(op);
  if (ext.length > 0) m['vendor_extension'] = ext;
  return m;
}

/** Encode a Swagger 2.0 document (paths, definitions, info) as gnostic protobuf bytes. */
export function encodeGnosticDocument(doc: Record<string, unknown>): Buffer {
  const info = isObject(doc['info']) ? doc['info'] : {};
  const paths = isObject(doc['paths']) ? doc['paths'] : {};
  const defs = isObject(doc['definitions']) ? doc['definitions'] : {};
  const msg = {
    swagger: String(doc['swagger'] ?? '2.0'),
    info: { title: String(info['title'] ?? ''), version: String(info['version'] ?? '') },
    paths: {
      path: Object.entries(paths).map(([name, item]) => {
        const it = isObject(item) ? item : {};
        const value: Msg = {};
        for (const verb of ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'])
          if (it[verb] !== undefined) value[verb] = operationMessage(it[verb]);
        return { name, value };
      }),
    },
    definitions: { additional_properties: Object.entries(defs).map(([name, s]) => ({ name, value: schemaMessage(s) })) },
  };
  const t = docType();
  return Buffer.from(t.encode(t.fromObject(msg)).finish());
}

/** Decode gnostic protobuf bytes back into plain message objects (for tests and debugging). */
export function decodeGnosticDocument(bytes: Uint8Array): Record<string, unknown> {
  const t = docType();
  return t.toObject(t.decode(bytes), { longs: Number, defaults: false, oneofs: false }) as Record<string, unknown>;
}

export { startOpenAIStub } from './openai.js';
export type { OpenAIStub, OpenAIStubOptions, StubApi, StubBehaviour, StubRequest, StubToolCall } from './openai.js';
export type { ResponsesStreamEnd } from './openai-responses.js';
export { startAnthropicStub } from './anthropic.js';
export { anthropicErrorType } from '../inference/errors.js';
export type {
  AnthropicRoute,
  AnthropicStreamEnd,
  AnthropicStub,
  AnthropicStubBehaviour,
  AnthropicStubOptions,
  AnthropicStubRequest,
  AnthropicStubToolUse,
} from './anthropic.js';
export { startMcpStub } from './mcp.js';
export type { McpStub, McpStubOptions, McpStubTool } from './mcp.js';
// A test client beside the stubs: the status of a CONNECT through the router's egress proxy.
export { connectStatus } from '../testing/http.js';

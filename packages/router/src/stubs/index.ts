export { startOpenAIStub } from './openai.js';
export type { OpenAIStub, OpenAIStubOptions, StubBehaviour, StubRequest, StubToolCall } from './openai.js';
export { startMcpStub } from './mcp.js';
export type { McpStub, McpStubOptions, McpStubTool } from './mcp.js';

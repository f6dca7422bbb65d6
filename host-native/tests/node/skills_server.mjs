// A skills server on the official TypeScript SDK 2.4.0 (`@modelcontextprotocol/server`, its
// SEP-2640 extension): it serves the skill folders under the directory given as its one
// argument over stdio. The second, independent implementation of the Skills wire shapes
// (manifests, digests, `skill://` files) that host-native/tests/skills.rs puts behind `serve`.
import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { loadSkills } from '@modelcontextprotocol/server/ext/skills/node';

const mcp = new McpServer({ name: 'ts-skills', version: '1.0.0' });
const skills = await loadSkills(process.argv[2]);
skills.attach(mcp);
await mcp.connect(new StdioServerTransport());

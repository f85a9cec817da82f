// An agent on the official MCP TypeScript SDK: it connects to the
// host's MCP endpoint (argv[2]) with the bearer token of
// AIRLOCK_TEST_MCP_TOKEN — or, when AIRLOCK_TEST_MCP_COMMAND is set (a
// JSON array), starts that command and speaks MCP on its stdio —, lists
// the tools, calls the plugin/v1 and the Executa tool, is refused by the
// policy, is held for approval (AIRLOCK_TEST_MCP_STEPS: a comma-separated
// subset), and prints one JSON line per step for the Go test to check.
const path = require("path");

const mod = process.env.AIRLOCK_TEST_MCP_MODULE;
const { Client } = require(path.join(mod, "dist/cjs/client/index.js"));
const { StreamableHTTPClientTransport } = require(path.join(mod, "dist/cjs/client/streamableHttp.js"));
const { StdioClientTransport } = require(path.join(mod, "dist/cjs/client/stdio.js"));
const { ToolListChangedNotificationSchema } = require(path.join(mod, "dist/cjs/types.js"));
const steps = (process.env.AIRLOCK_TEST_MCP_STEPS || "v1,executa,refused,held,list_changed").split(",");

const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function main() {
  let transport;
  if (process.env.AIRLOCK_TEST_MCP_COMMAND) {
    const [command, ...args] = JSON.parse(process.env.AIRLOCK_TEST_MCP_COMMAND);
    transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), {
      requestInit: { headers: { Authorization: "Bearer " + process.env.AIRLOCK_TEST_MCP_TOKEN } },
    });
  }
  const client = new Client({ name: "airlock-test-ts", version: "1.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  out({
    step: "list",
    tools: tools.map((t) => ({
      name: t.name,
      method: (t._meta || {})["dev.airlock/method"],
      untrusted: (t._meta || {})["dev.airlock/untrusted"],
      readOnly: (t.annotations || {}).readOnlyHint === true,
      schemaType: t.inputSchema.type,
    })),
  });
  const byMethod = (m) => {
    const t = tools.find((x) => (x._meta || {})["dev.airlock/method"] === m);
    if (!t) throw new Error("no tool for method " + m);
    return t.name;
  };
  const call = async (step, method, args) => {
    if (!steps.includes(step)) return;
    const progress = [];
    const r = await client.callTool({ name: byMethod(method), arguments: args }, undefined, {
      onprogress: (p) => progress.push(p.message || ""),
    });
    out({ step, isError: r.isError === true, structured: r.structuredContent, meta: r._meta || {}, progress });
  };
  await call("v1", "numinance.ports.tickets.v1.Tickets/ListTickets", { project: "demo" });
  await call("executa", "summarize", { base_url: process.env.AIRLOCK_TEST_MCP_BASE_URL });
  await call("refused", "numinance.ports.tickets.v1.Tickets/ListTickets", { project: "forbidden" });
  await call("held", "numinance.ports.tickets.v1.Tickets/CreateTicket", { project: "demo", title: "t" });
  if (steps.includes("list_changed")) {
    const changed = new Promise((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()));
    // The Go test makes a plugin crash once it reads this line.
    out({ step: "waiting" });
    let timer;
    await Promise.race([changed, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("no tools/list_changed")), 60000);
    })]);
    clearTimeout(timer);
    const { tools: after } = await client.listTools();
    out({ step: "list_changed", tools: after.map((t) => ({ name: t.name, method: (t._meta || {})["dev.airlock/method"] })) });
  }
  await client.close();
}

main().catch((e) => {
  out({ step: "error", error: String(e && e.message ? e.message : e) });
  process.exit(1);
});

"""What ``amux hub connect`` prints for the agents configured by a file: OpenCode, GitHub Copilot CLI, Qwen Code
and Gemini CLI (DESIGN.md §22.5, docs/agents.md).

Each set-up is a file and its exact content, pasted once: the ``amux`` server over the Hub's MCP HTTP listener
with the token read from ``$AMUX_TOKEN`` by the agent itself (``{env:AMUX_TOKEN}``, ``${AMUX_TOKEN}``,
``$AMUX_TOKEN``), so no file holds it, and the setting that turns the agent's own memory off where one exists.
Measured on OpenCode 1.18.33, Copilot CLI 1.0.102, Qwen Code 0.15.10, Gemini CLI 0.61.0
(``tests/test_launch_more_agents.py`` pastes each into a throwaway home).
"""

from __future__ import annotations

from typing import Any, Final

from amux_memory.tools.client.settings import TOKEN_ENV as TOKEN_VAR

FILE_AGENTS: Final = ("opencode", "copilot", "qwen", "gemini")
"""The agents whose set-up is a file to paste (the others' is a command)."""



def agent_files(agent: str, url: str) -> tuple[list[dict[str, Any]], list[str]]:
    """``(files, notes)`` for ``agent``: each file as ``{"path", "content"}`` (``path`` as shell text under
    ``~``, ``content`` a JSON object to merge into the file), and the notes to print after them."""
    auth = {"opencode": f"Bearer {{env:{TOKEN_VAR}}}", "copilot": f"Bearer ${{{TOKEN_VAR}}}"}.get(
        agent, f"Bearer ${TOKEN_VAR}")
    headers = {"Authorization": auth}
    if agent == "opencode":
        return ([{"path": "~/.config/opencode/opencode.json",
                  "content": {"mcp": {"amux": {"type": "remote", "url": url, "headers": headers}}}}],
                ["OpenCode passes the Hub's memory protocol to the model and allows the amux tools by default; it "
                 "has no memory of its own to switch off."])
    if agent == "copilot":
        return ([{"path": "~/.copilot/mcp-config.json",
                  "content": {"mcpServers": {"amux": {"type": "http", "url": url, "headers": headers,
                                                      "tools": ["*"]}}}},
                 {"path": "~/.copilot/settings.json", "content": {"memory": False}}],
                ["\"memory\": false turns Copilot CLI's own memory off. Copilot CLI does not pass the Hub's memory "
                 "protocol on (MCP server instructions are dropped): 'amux launch copilot' adds it as custom "
                 "instructions. In -p runs, allow the memory writes with --allow-tool=amux; add "
                 "--excluded-tools=session_store_sql to keep its search over past sessions out."])
    if agent == "qwen":
        return ([{"path": "~/.qwen/settings.json",
                  "content": {"mcpServers": {"amux": {"httpUrl": url, "headers": headers, "trust": True}},
                              "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}}}],
                ["enableManagedAutoMemory false turns Qwen Code's own auto memory off; trust lets the amux tools "
                 "run without a prompt (nothing else). Qwen Code does not pass the Hub's memory protocol on and "
                 "finds the amux tools through its tool search: 'amux launch qwen' adds the protocol and offers "
                 "the tools directly."])
    return ([{"path": "~/.gemini/settings.json",
              "content": {"mcpServers": {"amux": {"httpUrl": url, "headers": headers, "trust": True}}}}],
            ["Gemini CLI's own memory cannot be switched off: its system prompt always tells the model to save "
             "facts in GEMINI.md (no setting removes that), so it has two memories. Gemini CLI uses MCP servers "
             "only in a trusted folder: answer its trust prompt, or pass --skip-trust for one run."])

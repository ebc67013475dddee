/* The harnesses `gantry wrap` knows, kept as data: where each is installed
 * and keeps its login, relative to $HOME, and the variables that carry its
 * tokens, as -secret specs: bound to the API host the harness sends them
 * to and the header it sends them in, so that they are injected at egress
 * and the guest holds a placeholder (wrap -inject-tokens=false: the
 * values). A path that is not there is skipped. */
#include <stddef.h>

#include "wrap/wrap.h"

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

const struct wrap_harness wrap_harnesses[] = {
	{ "claude", LIST(".local/share/claude", ".claude/local"), LIST(".claude"),
	  LIST(".claude/settings.json", ".claude/settings.local.json", ".claude/hooks",
	       ".claude/plugins", ".claude/.config.json"),
	  LIST("ANTHROPIC_API_KEY@api.anthropic.com,header=x-api-key",
	       "ANTHROPIC_AUTH_TOKEN@api.anthropic.com,header=Authorization",
	       "CLAUDE_CODE_OAUTH_TOKEN@api.anthropic.com,header=Authorization") },
	{ "codex", LIST(".codex/bin"), LIST(".codex"), LIST(".codex/config.toml", ".codex/.env"),
	  LIST("OPENAI_API_KEY@api.openai.com,header=Authorization",
	       "CODEX_API_KEY@api.openai.com,header=Authorization") },
	{ "gemini", LIST(".gemini/bin"), LIST(".gemini"),
	  LIST(".gemini/settings.json", ".gemini/extensions", ".gemini/.env",
	       ".gemini/trustedFolders.json"),
	  LIST("GEMINI_API_KEY@generativelanguage.googleapis.com,header=x-goog-api-key",
	       "GOOGLE_API_KEY@generativelanguage.googleapis.com,header=x-goog-api-key") },
	/* Its config directory (config, plugins, tools it imports) is read-only;
	 * its logins are in .local/share/opencode, where bin/ holds the tools
	 * it downloads and runs. */
	{ "opencode", LIST(".opencode/bin", ".config/opencode"), LIST(".local/share/opencode"),
	  LIST(".local/share/opencode/bin"),
	  LIST("OPENROUTER_API_KEY@openrouter.ai,header=Authorization") },
	/* Where npm, bun and the like install them for a user. */
	{ "installers", LIST(".local/bin", ".npm-global", ".bun", ".nvm", ".volta", ".cargo/bin"),
	  LIST(NULL), LIST(NULL), LIST(NULL) },
	{ 0 },
};

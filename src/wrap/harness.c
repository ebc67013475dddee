/* The harnesses `gantry wrap` knows, kept as data: where each is installed
 * and keeps its login, relative to $HOME, and the variables that carry its
 * tokens. A path that is not there is skipped. */
#include <stddef.h>

#include "wrap/wrap.h"

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

const struct wrap_harness wrap_harnesses[] = {
	{ "claude", LIST(".local/share/claude", ".claude/local"), LIST(".claude"),
	  LIST("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN") },
	{ "codex", LIST(".codex/bin"), LIST(".codex"), LIST("OPENAI_API_KEY", "CODEX_API_KEY") },
	{ "gemini", LIST(".gemini/bin"), LIST(".gemini"), LIST("GEMINI_API_KEY", "GOOGLE_API_KEY") },
	{ "opencode", LIST(".opencode/bin"), LIST(".config/opencode", ".local/share/opencode"),
	  LIST("OPENROUTER_API_KEY") },
	/* Where npm, bun and the like install them for a user. */
	{ "installers", LIST(".local/bin", ".npm-global", ".bun", ".nvm", ".volta", ".cargo/bin"),
	  LIST(NULL), LIST(NULL) },
	{ 0 },
};

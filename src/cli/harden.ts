/**
 * The CLI's own process hardening, done before any command runs (so before
 * the first secret is decrypted): no core file (RLIMIT_CORE 0) and, on Linux,
 * PR_SET_DUMPABLE 0, which also stops another process of the same user from
 * reading this one's memory through ptrace or /proc/<pid>/mem; macOS refuses
 * debuggers with PT_DENY_ATTACH instead. The same call the agent makes
 * (native/<os>/harden_<os>.cc).
 *
 * A command's children inherit the core limit of 0 (dumpable is reset by
 * execve): `stash env` hands them secrets in their environment, which a core
 * file of theirs would hold just the same (docs/cli.md).
 */
import { errorMessage } from '../errors.js';
import { warn } from './output.js';

/** Hardens this process; warns once (never fails the command) when the addon cannot. */
export async function hardenCli(): Promise<void> {
  try {
    // Loaded here, not at the top: `stash --help` loads no addon.
    const { loadBinding } = await import('../native/binding.js');
    loadBinding().hardenProcess();
  } catch (err) {
    warn(
      `could not turn off core dumps of this process (${errorMessage(err)}); a crash could write decrypted secrets to a core file`,
    );
  }
}

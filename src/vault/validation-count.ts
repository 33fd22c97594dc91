/**
 * How many times this process ran each name validator: validateContainerName
 * (names.ts) and validateEntryPath (entry-path.ts), the checks of a name given
 * to stash (file contents are checked by their own decoders and not counted).
 * Only a test reads it: with STASH_TEST_COUNT_VALIDATIONS=1 the CLI prints
 * these counts on stderr as it exits (src/cli/main.ts, docs/testing.md), so a
 * suite can prove that a command parses each name once (docs/architecture.md).
 */
export const validationCount = { containerName: 0, entryPath: 0 };

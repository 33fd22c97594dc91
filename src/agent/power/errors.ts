import { StashError } from '../../errors.js';

/** Misuse of the power integration (bad arguments). Missing OS facilities are never errors: see status(). */
export class PowerError extends StashError {}

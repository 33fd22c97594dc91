/**
 * Argument checks shared by the typed wrappers of src/native: every argument is
 * checked here, in JavaScript, before the native call, which checks nothing a
 * wrapper can check first.
 */
import { NativeError } from '../errors.js';

/** `value` is a whole number from `min` to 2^31-1 (what the addon reads as an int32), else EINVAL naming `name`. */
export function checkInt(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min || value > 0x7fffffff)
    throw new NativeError('EINVAL', `${name} must be an integer >= ${min}: ${value}`);
}

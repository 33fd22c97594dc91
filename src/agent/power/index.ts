/**
 * The agent's power integration: one class per OS behind one abstract class,
 * picked here and nowhere else.
 *
 *   const power = createPowerIntegration();
 *   void power.start({ beforeSleep: async () => { cache.clear(); ... }, log });
 *   registry onChange: (kinds) => power.setActivityInhibit(preventSleep ? kinds : []);
 *   ...
 *   power.stop();
 */
import { errorMessage } from '../../errors.js';
import { loadBinding } from '../../native/binding.js';
import { IOKitPowerIntegration } from './darwin.js';
import { LogindPowerIntegration } from './linux.js';
import { NullPowerIntegration } from './none.js';
import type { PowerIntegration, PowerOptions } from './power-integration.js';
import { WindowsPowerIntegration } from './win32.js';

export { PowerIntegration } from './power-integration.js';
export type { PowerBackend, PowerHooks, PowerOptions, PowerStatus, LogLevel } from './power-integration.js';
export { PowerError } from './errors.js';
export { LogindPowerIntegration, IOKitPowerIntegration, WindowsPowerIntegration, NullPowerIntegration };

/**
 * The power integration for this platform: logind on Linux, IOKit on macOS,
 * the Windows power API on win32; a no-op (status says why) elsewhere or when
 * the native addon cannot be loaded. Never throws.
 */
export function createPowerIntegration(opts: PowerOptions & { platform?: NodeJS.Platform } = {}): PowerIntegration {
  const { platform = process.platform, ...options } = opts;
  if (platform !== 'linux' && platform !== 'darwin' && platform !== 'win32') {
    return new NullPowerIntegration(`no suspend protection on ${platform}`, options);
  }
  try {
    loadBinding();
  } catch (err) {
    return new NullPowerIntegration(errorMessage(err), options);
  }
  switch (platform) {
    case 'linux':
      return new LogindPowerIntegration(options);
    case 'darwin':
      return new IOKitPowerIntegration(options);
    case 'win32':
      return new WindowsPowerIntegration(options);
  }
}

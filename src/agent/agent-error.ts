/**
 * The agent client's error, and the one for a reply it cannot read. A module of
 * its own so that transport.ts, which loads the transports on demand, and the
 * transports (transport-net.ts, transport-blocking.ts), which raise these
 * errors, do not import each other: each imports this file instead.
 */
import { ProtocolError } from '../protocol/index.js';
import { StashError, errorMessage } from '../errors.js';
import type { Endpoint } from './paths.js';

/** An ERROR reply from the agent, or a failure to talk to it. code: AGENT_<NAME>. */
export class AgentError extends StashError {
  constructor(
    code: string,
    message: string,
    readonly protocolCode: number | null = null,
  ) {
    super(code, message);
  }
}

/** The AgentError for a reply the decoder refused. */
export function unreadableReply(endpoint: Endpoint, err: unknown): AgentError {
  return err instanceof ProtocolError && err.code === 'AGENT_BAD_MAGIC'
    ? new AgentError(
        'AGENT_VERSION',
        `the agent at ${endpoint.path} speaks another protocol version (${err.message}); stop it and run the matching stash, or remove the socket`,
      )
    : new AgentError('AGENT_PROTOCOL', `unreadable reply from the agent: ${errorMessage(err)}`);
}

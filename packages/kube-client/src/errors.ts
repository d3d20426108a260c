/** Why a connection or stream was given up; stable codes for logs, metrics and tests. */
export type ConnectionLossReason = 'ping' | 'idle' | 'reset' | 'goaway' | 'closed' | 'connect';

/**
 * The HTTP/2 connection (or one watch stream) was declared dead by the client: a PING went
 * unanswered, no byte arrived within the idle deadline, or the peer reset or closed it.
 */
export class ConnectionLostError extends Error {
  readonly code = 'KARS_CONNECTION_LOST';
  constructor(
    readonly reason: ConnectionLossReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ConnectionLostError';
  }
}

/** The kubeconfig could not be loaded or names no usable cluster. */
export class KubeconfigError extends Error {
  readonly code = 'KARS_KUBECONFIG_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeconfigError';
  }
}

import { generateKeyPairSync, createPrivateKey, createPublicKey, randomUUID } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { SignJWT, jwtVerify } from 'jose';

/** The issuer (and default audience) of ServiceAccount tokens, as kube-apiserver's default. */
export const TOKEN_ISSUER = 'https://kubernetes.default.svc.cluster.local';
/** kube's bounds for TokenRequest.spec.expirationSeconds (minimum 10 minutes; we cap at 48 h). */
export const MIN_TOKEN_SECONDS = 600;
export const MAX_TOKEN_SECONDS = 48 * 3600;
export const DEFAULT_TOKEN_SECONDS = 3600;

/** Who a verified token speaks for. */
export interface TokenClaims {
  namespace: string;
  name: string;
  uid: string;
  audiences: string[];
  expiresAtMs: number;
  /** The token's id (`jti`), which kube reports as the user's credential id; absent from tokens issued before kars set one. */
  jti?: string;
}

/**
 * ServiceAccount tokens: RS256 JWTs signed with a key of their own (`<data-dir>/pki/sa.key`, made on
 * first start and kept, so tokens survive restarts and certificate re-issue), in kube's claim shape
 * (`sub: system:serviceaccount:NS:NAME`, `kubernetes.io: {namespace, serviceaccount: {name, uid}}`, a random `jti`).
 * See ADR 0007.
 *
 * Guarantees: `verify` accepts only RS256 signatures by this key, unexpired (60 s leeway for clock
 * skew, as kube), with our issuer, and an audience the server accepts. The caller must still check that
 * the ServiceAccount exists with the token's uid: that is what makes deleting the account revoke it.
 */
export class ServiceAccountTokens {
  private constructor(
    private readonly priv: KeyObject,
    private readonly pub: KeyObject,
  ) {}

  /** Load the signing key from `file`, creating it on first start. */
  static load(file: string): ServiceAccountTokens {
    if (!existsSync(file)) {
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    }
    const priv = createPrivateKey(readFileSync(file, 'utf8'));
    return new ServiceAccountTokens(priv, createPublicKey(priv));
  }

  /** Sign a token for a ServiceAccount. */
  async issue(
    sa: { namespace: string; name: string; uid: string },
    audiences: string[],
    expirationSeconds: number,
    nowMs = Date.now(),
  ): Promise<{ token: string; expiresAtMs: number }> {
    const iat = Math.floor(nowMs / 1000);
    const exp = iat + expirationSeconds;
    const token = await new SignJWT({ 'kubernetes.io': { namespace: sa.namespace, serviceaccount: { name: sa.name, uid: sa.uid } } })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setSubject(`system:serviceaccount:${sa.namespace}:${sa.name}`)
      .setAudience(audiences)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(exp)
      .setJti(randomUUID())
      .sign(this.priv);
    return { token, expiresAtMs: exp * 1000 };
  }

  /** The claims of a valid token, or undefined for anything else (never throws). */
  async verify(token: string): Promise<TokenClaims | undefined> {
    if (token.split('.').length !== 3) return undefined;
    try {
      const { payload } = await jwtVerify(token, this.pub, {
        algorithms: ['RS256'],
        issuer: TOKEN_ISSUER,
        audience: TOKEN_ISSUER,
        clockTolerance: 60,
      });
      const k = payload['kubernetes.io'] as { namespace?: unknown; serviceaccount?: { name?: unknown; uid?: unknown } } | undefined;
      const namespace = k?.namespace;
      const name = k?.serviceaccount?.name;
      const uid = k?.serviceaccount?.uid;
      if (typeof namespace !== 'string' || typeof name !== 'string' || typeof uid !== 'string' || payload.exp === undefined)
        return undefined;
      if (payload.sub !== `system:serviceaccount:${namespace}:${name}`) return undefined;
      const aud = payload.aud;
      const audiences = Array.isArray(aud) ? aud : aud ? [aud] : [];
      const jti = typeof payload.jti === 'string' && payload.jti !== '' ? { jti: payload.jti } : {};
      return { namespace, name, uid, audiences, expiresAtMs: payload.exp * 1000, ...jti };
    } catch {
      return undefined;
    }
  }
}

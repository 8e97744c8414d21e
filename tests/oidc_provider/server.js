// The OpenID provider the single sign-on tests sign in at: panva's oidc-provider (a certified
// implementation: discovery, PKCE, signed ID tokens, expiring codes), started by
// tests/oidc_server.py on loopback. Its login page takes any login with any password; the
// login names an account of ACCOUNTS_FILE, whose claims (email, email_verified, groups) the
// tests choose. A login starting with "expired" gets an authorization code that lives one
// second, so a test can present an expired code.
//
//   node server.js ACCOUNTS_FILE CLIENT_ID CLIENT_SECRET CALLBACK_PATH
// prints "listening ISSUER" once it serves.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const [accountsFile, clientId, clientSecret, callbackPath] = process.argv.slice(2);
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', 'testserver']);

function accounts() {
  // Read at each login: a test may add an account while the provider runs.
  return JSON.parse(readFileSync(accountsFile, 'utf8'));
}

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [`http://127.0.0.1${callbackPath}`],
      token_endpoint_auth_method: 'client_secret_post',
    }],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    scopes: ['openid', 'email', 'profile', 'groups'],
    pkce: { required: () => true },
    ttl: {
      AuthorizationCode: (ctx, code) => (code.accountId.startsWith('expired') ? 1 : 60),
    },
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['arbiter-tests-only'] },
    async findAccount(ctx, id) {
      const claims = accounts()[id];
      if (claims === undefined) {
        return undefined;
      }
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
    },
    // No consent screen: Arbiter is the provider's own application here, as it is at a
    // company's provider.
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
  });
  // The Django test client calls back to http://testserver, the live server to a free port on
  // loopback: any of those hosts, the callback's path exactly.
  provider.Client.prototype.redirectUriAllowed = function redirectUriAllowed(value) {
    try {
      const url = new URL(value);
      return LOOPBACK_HOSTS.has(url.hostname) && url.pathname === callbackPath && !url.search;
    } catch {
      return false;
    }
  };
  server.on('request', provider.callback());
  console.log(`listening ${issuer}`);
});

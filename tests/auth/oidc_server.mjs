// A real OAuth 2.1 / OpenID authorization server for the OAuth tests: oidc-provider (npm, pinned in
// tests/peers/package.json), configured for dynamic client registration, PKCE, resource indicators
// (RFC 8707: JWT access tokens whose audience is the MCP server), refresh-token rotation with family
// revocation on reuse, client credentials, and token revocation. Listens on 127.0.0.1 only.
//
// usage: PORT=... node oidc_server.mjs PROVIDER_DIR RESOURCE_URL[,RESOURCE_URL...] ACCESS_TTL_S [opaque]
// With `opaque`, access tokens are opaque strings (checked by introspection, RFC 7662) instead of JWTs.
// The clients robot and intern (client credentials) get groups in their tokens (`groups`, and nested in
// `realm_access.roles`); the client gateway may only introspect.
// GET /test/stats answers counters of the grants it served (for the tests' assertions).
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [providerDir, resourceList, ttlText, format = 'jwt'] = process.argv.slice(2);
const resources = resourceList.split(',');
const resource = resources[0];
const portText = process.env.PORT;
const { default: Provider } = await import(pathToFileURL(path.join(providerDir, 'lib', 'index.js')).href);
const port = Number(portText);
const ttl = Number(ttlText);
const issuer = `http://127.0.0.1:${port}`;
const stats = { authorization_code: 0, refresh_token: 0, client_credentials: 0, reuse: 0, errors: 0, registrations: 0 };

const provider = new Provider(issuer, {
  clients: [['robot', 'robot-secret-0123456789'], ['intern', 'intern-secret-0123456789'],
    ['gateway', 'gateway-secret-0123456789']].map(([id, secret]) => ({
    client_id: id,
    client_secret: secret,
    grant_types: id === 'gateway' ? [] : ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  extraTokenClaims: async (_ctx, token) => {
    const groups = { robot: ['admins', 'ops'], intern: ['interns'] }[token.clientId];
    return groups && { groups, realm_access: { roles: groups.map((group) => `realm-${group}`) } };
  },
  scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:write', 'mcpmux:read', 'mcpmux:execute', 'mcpmux:admin'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator) => {
        if (!resources.includes(indicator)) throw new Error(`unknown resource ${indicator}`);
        return {
          scope: 'mcp:read mcp:write mcpmux:read mcpmux:execute mcpmux:admin',
          audience: indicator,
          accessTokenTTL: ttl,
          accessTokenFormat: format === 'opaque' ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: true,
  ttl: { RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 120 },
});

provider.on('grant.success', (ctx) => {
  const kind = ctx.oidc.params.grant_type;
  if (kind in stats) stats[kind] += 1;
});
provider.on('grant.error', (_ctx, error) => {
  stats.errors += 1;
  if (String(error.error_description).includes('already used')) stats.reuse += 1;
});
provider.on('registration_create.success', () => { stats.registrations += 1; });

const app = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url === '/test/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  app(req, res);
});
server.listen(port, '127.0.0.1', () => process.stdout.write(`ready ${issuer}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));

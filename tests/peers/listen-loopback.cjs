'use strict';
// Node preload (NODE_OPTIONS="--require /abs/listen-loopback.cjs"): every TCP listen() that names no
// host, or names a wildcard (0.0.0.0, ::), binds 127.0.0.1 instead. server-everything and the
// conformance suite's mock servers listen on every interface; tests must never expose them.
//
// Why _listen2: Server.prototype.listen() normalises its many call forms (port, options, host
// lookups) and ends in listenInCluster(), which calls server._listen2(address, port, addressType,
// backlog, fd, flags) with address null when no host was given. Patching that one seam covers
// net, http, https and every framework on top of them. listen() is wrapped too, so that a Node
// release without the _listen2 seam fails loudly instead of silently binding every interface.
const net = require('node:net');

const WILDCARDS = new Set([null, undefined, '', '0.0.0.0', '::', '::0', '[::]', '0:0:0:0:0:0:0:0']);
const LOOPBACK = '127.0.0.1';

if (typeof net.Server.prototype._listen2 !== 'function') {
  throw new Error('listen-loopback.cjs: net.Server.prototype._listen2 is missing in Node ' + process.version);
}

const originalListen2 = net.Server.prototype._listen2;
net.Server.prototype._listen2 = function listen2Loopback(address, port, addressType, backlog, fd, flags) {
  // A listen on an inherited fd or a pipe path carries no interface to rewrite.
  const isFd = typeof fd === 'number' && fd >= 0;
  const isPipe = typeof port !== 'number' || port < 0;
  if (!isFd && !isPipe && WILDCARDS.has(address)) {
    return originalListen2.call(this, LOOPBACK, port, 4, backlog, fd, flags);
  }
  return originalListen2.call(this, address, port, addressType, backlog, fd, flags);
};

const originalListen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenLoopback(...args) {
  const result = originalListen.apply(this, args);
  // listen() may resolve a host asynchronously; the check runs once the socket is bound.
  this.once('listening', () => {
    const bound = this.address();
    if (bound && typeof bound === 'object' && WILDCARDS.has(bound.address)) {
      this.close();
      throw new Error('listen-loopback.cjs: a server bound ' + bound.address + ':' + bound.port);
    }
  });
  return result;
};

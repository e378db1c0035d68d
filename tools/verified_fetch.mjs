#!/usr/bin/env node
// Fetch CIDs from one trustless gateway with @helia/verified-fetch (needs node >= 22: run it with
// tools/node_modules/node/bin/node), and print what came back, for tests/gateway/test_js_clients.py.
//
// usage: node tools/verified_fetch.mjs GATEWAY_URL CID...
// prints one JSON line: [{"cid", "status", "sha256": hex of the body, "length", "error"}]
//
// Router snag (helia 7.1): a router whose capabilities() say only 'fallback' is consulted only when
// ordinary routers found nothing, and with no ordinary router it is never consulted, so the gateway
// is never asked. The gateway is therefore registered as an ordinary router: the fallback router's
// findProviders, with capabilities() answering ['findProviders'].
import { createHash } from 'node:crypto'
import { createHeliaLight } from 'helia'
import { trustlessGatewayBlockBroker } from '@helia/trustless-gateway-client'
import { fallbackRouter } from '@helia/fallback-router'
import { createVerifiedFetchWithHelia } from '@helia/verified-fetch'

const [gateway, ...cids] = process.argv.slice(2)
if (!gateway || cids.length === 0) { console.error('usage: verified_fetch.mjs GATEWAY_URL CID...'); process.exit(2) }

const helia = createHeliaLight({})
helia.addBlockBroker(trustlessGatewayBlockBroker({ allowInsecure: true, allowLocal: true }))
const inner = fallbackRouter({ gateways: [gateway], shuffle: false })
helia.routing.addRouter({
  name: 'kuro-gateway',
  capabilities: () => ['findProviders'],
  findProviders: (cid, options) => inner.findProviders(cid, options),
  toString: () => `kuro-gateway(${gateway})`
})
await helia.start()
const vfetch = await createVerifiedFetchWithHelia(helia)

const results = []
for (const cid of cids) {
  const result = { cid, status: null, sha256: null, length: null, error: null }
  try {
    const resp = await vfetch(`ipfs://${cid}`, { signal: AbortSignal.timeout(30000) })
    result.status = resp.status
    const body = new Uint8Array(await resp.arrayBuffer())
    result.length = body.length
    result.sha256 = createHash('sha256').update(body).digest('hex')
  } catch (err) {
    result.error = String(err && err.message ? err.message : err)
  }
  results.push(result)
}
await vfetch.stop()
await helia.stop()
console.log(JSON.stringify(results))

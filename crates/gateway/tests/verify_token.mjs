// A backend in Node checking a Countersign countersignature with jose and canonicalize.
//
// usage: node verify_token.mjs JWKS_URL TOKEN ACTION ARGUMENTS_JSON CARD_JSON [RECEIPT]

import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { createRemoteJWKSet, errors, jwtVerify } from "jose";

const [jwksUrl, token, action, argumentsJson, cardJson, receipt] = process.argv.slice(2);
const jwks = createRemoteJWKSet(new URL(jwksUrl));

async function verify(token, action, args) {
  const { payload } = await jwtVerify(token, jwks, {
    algorithms: ["Ed25519"],
    issuer: "countersign-gateway",
    audience: "countersign-backend",
    typ: "countersign-approval+jwt",
    requiredClaims: ["exp", "nbf", "jti"],
    clockTolerance: 5, // seconds of clock difference with the gateway
  });
  const details = payload.authorization_details.filter((d) => d.type === "countersign_action");
  if (details.length !== 1) throw new Error("no single countersign_action entry");
  const [detail] = details;
  const digest = createHash("sha256").update(canonicalize(args), "utf8").digest("hex");
  if (detail.action !== action) throw new Error("other action");
  if (detail.args_sha256 !== digest) throw new Error("other arguments");
  return { payload, detail };
}

// The card's words as this backend draws them now, from its own data.
function checkCard(detail, action, args, card) {
  const words = { ...card, action, arguments: args };
  const digest = createHash("sha256").update(canonicalize(words), "utf8").digest("hex");
  if (detail.card_sha256 !== digest) throw new Error("other card");
}

const args = JSON.parse(argumentsJson);
const { payload, detail } = await verify(token, action, args);
console.log(
  `verified: ${detail.action} call ${detail.call} decision ${detail.decision} ` +
    `presence ${detail.presence} asked by ${payload.act.sub}`,
);
const card = JSON.parse(cardJson);
checkCard(detail, action, args, card);
console.log("card: the words the person approved hold");
try {
  checkCard(detail, action, args, { ...card, consequence: "101 pages are renamed" });
  throw new Error("accepted a stale card");
} catch (e) {
  if (e.message !== "other card") throw e;
  console.log(`refused: ${e.message}`);
}
try {
  await verify(token, action, { ...args, count: 4 });
  throw new Error("accepted other arguments");
} catch (e) {
  if (e.message !== "other arguments") throw e;
  console.log(`refused: ${e.message}`);
}
const [head, body, sig] = token.split(".");
const tampered = [head, body, (sig[0] !== "A" ? "A" : "B") + sig.slice(1)].join(".");
try {
  await verify(tampered, action, args);
  throw new Error("accepted a tampered token");
} catch (e) {
  if (!(e instanceof errors.JWSSignatureVerificationFailed)) throw e;
  console.log("refused: tampered");
}
if (receipt) {
  // A receipt is a statement, not a permission: no expiry, never spent.
  const { payload: said } = await jwtVerify(receipt, jwks, {
    algorithms: ["Ed25519"],
    issuer: "countersign-gateway",
    typ: "countersign-receipt+jwt",
  });
  const approval = createHash("sha256").update(token, "utf8").digest("hex");
  if (said.outcome.approval_sha256 !== approval) throw new Error("a receipt for another approval");
  console.log(`receipt: ${said.outcome.action} ${said.outcome.code} for this approval`);
  try {
    await verify(receipt, action, args);
    throw new Error("accepted a receipt as an approval");
  } catch (e) {
    if (!(e instanceof errors.JWTClaimValidationFailed)) throw e;
    console.log(`refused: a receipt is not an approval (${e.message})`);
  }
}

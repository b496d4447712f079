"""A backend in Python checking a Countersign countersignature with joserfc and rfc8785.

usage: verify_token.py JWKS_URL TOKEN ACTION ARGUMENTS_JSON CARD_JSON [RECEIPT]
"""

import hashlib
import json
import sys
import urllib.request

import rfc8785  # the JSON Canonicalization Scheme (RFC 8785)
from joserfc import jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet

ISSUER = "countersign-gateway"
AUDIENCE = "countersign-backend"
TYPE = "countersign-approval+jwt"
RECEIPT_TYPE = "countersign-receipt+jwt"


def fetch_keys(jwks_url):
    with urllib.request.urlopen(jwks_url) as answer:
        return KeySet.import_key_set(json.load(answer))


def verify(token, keys, action, arguments):
    # Ed25519 only (RFC 9864); joserfc checks the signature with the key named by `kid`.
    decoded = jwt.decode(token, keys, algorithms=["Ed25519"])
    if decoded.header.get("typ") != TYPE:
        raise ValueError("not a countersignature")
    jwt.JWTClaimsRegistry(
        leeway=5,  # seconds of clock difference with the gateway
        iss={"essential": True, "value": ISSUER},
        aud={"essential": True, "value": AUDIENCE},
        exp={"essential": True},
        nbf={"essential": True},
        jti={"essential": True},
    ).validate(decoded.claims)
    details = [d for d in decoded.claims["authorization_details"] if d.get("type") == "countersign_action"]
    if len(details) != 1:
        raise ValueError("no single countersign_action entry")
    detail = details[0]
    if detail["action"] != action:
        raise ValueError("other action")
    if detail["args_sha256"] != hashlib.sha256(rfc8785.dumps(arguments)).hexdigest():
        raise ValueError("other arguments")
    return decoded.claims, detail


def check_card(detail, action, arguments, card):
    # The card's words as this backend draws them now, from its own data.
    words = {**card, "action": action, "arguments": arguments}
    if detail["card_sha256"] != hashlib.sha256(rfc8785.dumps(words)).hexdigest():
        raise ValueError("other card")


def check_receipt(receipt, keys, approval):
    # A receipt is a statement, not a permission: no expiry, never spent.
    decoded = jwt.decode(receipt, keys, algorithms=["Ed25519"])
    if decoded.header.get("typ") != RECEIPT_TYPE:
        raise ValueError("not a receipt")
    jwt.JWTClaimsRegistry(iss={"essential": True, "value": ISSUER}).validate(decoded.claims)
    outcome = decoded.claims["outcome"]
    if outcome["approval_sha256"] != hashlib.sha256(approval.encode()).hexdigest():
        raise ValueError("a receipt for another approval")
    return outcome


def main():
    jwks_url, token, action, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    keys = fetch_keys(jwks_url)
    claims, detail = verify(token, keys, action, arguments)
    print(f"verified: {detail['action']} call {detail['call']} decision {detail['decision']} "
          f"presence {detail['presence']} asked by {claims['act']['sub']}")
    card = json.loads(sys.argv[5])
    check_card(detail, action, arguments, card)
    print("card: the words the person approved hold")
    try:
        check_card(detail, action, arguments, {**card, "consequence": "101 pages are renamed"})
        sys.exit("accepted a stale card")
    except ValueError as e:
        print(f"refused: {e}")
    try:
        verify(token, keys, action, {**arguments, "count": 4})
        sys.exit("accepted other arguments")
    except ValueError as e:
        print(f"refused: {e}")
    head, body, sig = token.split(".")
    tampered = ".".join([head, body, ("A" if sig[0] != "A" else "B") + sig[1:]])
    try:
        verify(tampered, keys, action, arguments)
        sys.exit("accepted a tampered token")
    except BadSignatureError:
        print("refused: tampered")
    if len(sys.argv) > 6:
        outcome = check_receipt(sys.argv[6], keys, token)
        print(f"receipt: {outcome['action']} {outcome['code']} for this approval")
        try:
            verify(sys.argv[6], keys, action, arguments)
            sys.exit("accepted a receipt as an approval")
        except ValueError as e:
            print(f"refused: a receipt is not an approval ({e})")


if __name__ == "__main__":
    main()

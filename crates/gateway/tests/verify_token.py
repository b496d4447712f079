"""A backend in Python checking a Countersign countersignature with PyJWT.

usage: verify_token.py JWKS_URL TOKEN ACTION ARGUMENTS_JSON
"""

import hashlib
import json
import sys

import jwt  # PyJWT, with `cryptography` for EdDSA
import rfc8785  # the JSON Canonicalization Scheme


def args_sha256(arguments):
    # Countersign's canonical JSON is RFC 8785 (JCS).
    return hashlib.sha256(rfc8785.dumps(arguments)).hexdigest()


def verify(token, jwks_url, action, arguments):
    header = jwt.get_unverified_header(token)
    if header.get("typ") != "countersign+jwt" or header.get("alg") != "EdDSA":
        raise ValueError("not a countersignature")
    key = jwt.PyJWKClient(jwks_url).get_signing_key(header["kid"]).key
    claims = jwt.decode(
        token,
        key,
        algorithms=["EdDSA"],
        issuer="countersign-gateway",
        options={"require": ["exp", "iat", "iss", "jti"]},
    )
    if claims["action"] != action:
        raise ValueError("other action")
    if claims["args_sha256"] != args_sha256(arguments):
        raise ValueError("other arguments")
    return claims


def main():
    jwks_url, token, action, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    claims = verify(token, jwks_url, action, arguments)
    print(f"verified: {claims['action']} call {claims['call']} approved {claims['approved_by']} presence {claims['presence']}")
    try:
        verify(token, jwks_url, action, {**arguments, "count": 4})
        sys.exit("accepted other arguments")
    except ValueError as e:
        print(f"refused: {e}")
    head, body, sig = token.split(".")
    tampered = ".".join([head, body, ("A" if sig[0] != "A" else "B") + sig[1:]])
    try:
        verify(tampered, jwks_url, action, arguments)
        sys.exit("accepted a tampered token")
    except jwt.InvalidSignatureError:
        print("refused: tampered")


if __name__ == "__main__":
    main()

"""``verify_receipt``: a call's charge checked against the chain alone.

The receipt (``client.receipt(call_id)``, or a saved copy of ``GET /v1/calls/:callId/receipt``'s JSON) names a
batch, the receipt the batch committed to and a Merkle proof. The escrow's ``receiptsRoots(batch)`` is read with a
JSON-RPC ``eth_call`` over an RPC URL the caller chooses, and the receipt is proven only when its leaf, folded with
the proof (sorted-pair keccak256, OpenZeppelin's MerkleProof), gives that root. The gateway is neither trusted nor
contacted. The same checks, in the same order and with the same codes, as the TypeScript SDK's ``verifyReceipt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Union

import httpx

from ._keccak import keccak256

__all__ = ["verify_receipt", "ProvenReceipt", "ReceiptFailure", "VerifyReceiptResult", "RECEIPT_FAILURE_CODES"]

#: Why a receipt is not proven, one code per answer (the same as the TypeScript SDK's and the CLI's).
RECEIPT_FAILURE_CODES = ("invalid_receipt", "tampered_receipt", "wrong_proof", "unsettled", "wrong_chain", "chain_unreachable")

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_BYTES32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_UINT = re.compile(r"^(0|[1-9][0-9]{0,77})$")
_MAX_UINT256 = (1 << 256) - 1
_ZERO_ROOT = "0x" + "0" * 64
_RECEIPTS_ROOTS = keccak256(b"receiptsRoots(uint256)")[:4]
_BATCH_SETTLED = "0x" + keccak256(b"BatchSettled(uint256,bytes32,uint256,uint256,uint256,address)").hex()
_MICROS = Decimal(1_000_000)


@dataclass(frozen=True)
class ProvenReceipt:
    """What a proven receipt establishes: this call, with these amounts, is in this batch the escrow recorded on-chain.
    Amounts in USDC base units (micro-USDC); ``amount``, ``seller_share`` and ``platform_fee`` as exact USD Decimals."""

    call_id: str
    account: str
    seller: str
    amount_micros: int
    seller_share_micros: int
    platform_fee_micros: int
    batch_number: int
    #: The batch's root, read from the escrow.
    receipts_root: str
    leaf: str
    escrow: str
    chain_id: int
    #: The block and transaction that posted the batch (None when the receipt names no transaction the chain confirms).
    block_number: Optional[int]
    tx_hash: Optional[str]
    confirmations: Optional[int]
    ok: bool = True

    @property
    def amount(self) -> Decimal:
        return Decimal(self.amount_micros) / _MICROS

    @property
    def seller_share(self) -> Decimal:
        return Decimal(self.seller_share_micros) / _MICROS

    @property
    def platform_fee(self) -> Decimal:
        return Decimal(self.platform_fee_micros) / _MICROS


@dataclass(frozen=True)
class ReceiptFailure:
    """Why a receipt proves nothing: ``code`` (one of RECEIPT_FAILURE_CODES) and one sentence."""

    code: str
    message: str
    call_id: Optional[str] = None
    ok: bool = False


VerifyReceiptResult = Union[ProvenReceipt, ReceiptFailure]


class _Unreachable(Exception):
    pass


class _RpcError(Exception):
    def __init__(self, code: Any, message: str) -> None:
        super().__init__(message)
        self.code = code


def _leaf(call_id: str, account: str, seller: str, amount: int, fee: int) -> bytes:
    """keccak256(keccak256(abi.encode(bytes32, address, address, uint256, uint256))): the escrow's receiptLeaf."""
    encoded = (
        bytes.fromhex(call_id[2:])
        + bytes(12)
        + bytes.fromhex(account[2:])
        + bytes(12)
        + bytes.fromhex(seller[2:])
        + amount.to_bytes(32, "big")
        + fee.to_bytes(32, "big")
    )
    return keccak256(keccak256(encoded))


def _fold(leaf: bytes, proof: List[str]) -> bytes:
    node = leaf
    for sibling_hex in proof:
        sibling = bytes.fromhex(sibling_hex[2:])
        node = keccak256(node + sibling) if node < sibling else keccak256(sibling + node)
    return node


def checksum_address(address: str) -> str:
    """An address in EIP-55 mixed case."""
    lower = address[2:].lower()
    digest = keccak256(lower.encode()).hex()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(lower))


def call_id_to_bytes32(call_id: str) -> str:
    """A call id (a UUID) as the bytes32 a receipt carries: its 16 bytes, left-padded with zeros."""
    if not _UUID.match(call_id):
        raise ValueError(f'a call id must be a UUID, got "{call_id}"')
    return "0x" + "0" * 32 + call_id.replace("-", "").lower()


def _unwrap(receipt: Any) -> Optional[Mapping[str, Any]]:
    """The receipt inside what was given: the endpoint's whole answer, or its ``data``."""
    if not isinstance(receipt, Mapping):
        return None
    if receipt.get("success") is True and isinstance(receipt.get("data"), Mapping):
        return receipt["data"]
    return receipt


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problem(view: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with the receipt's form, or None."""
    r = view.get("receipt")
    if not isinstance(view.get("call_id"), str) or not _UUID.match(view["call_id"]):
        return "call_id is not a call id (a UUID)"
    if not _is_int(view.get("batch_number")) or view["batch_number"] < 1:
        return "batch_number is not a batch number"
    if not isinstance(r, Mapping):
        return "it has no receipt"
    if not isinstance(r.get("call_id"), str) or not _BYTES32.match(r["call_id"]):
        return "receipt.call_id is not 32 bytes of hex"
    for field in ("account", "seller"):
        if not isinstance(r.get(field), str) or not _ADDRESS.match(r[field]):
            return f"receipt.{field} is not an address"
    for field in ("amount", "platform_fee"):
        if not isinstance(r.get(field), str) or not _UINT.match(r[field]) or int(r[field]) > _MAX_UINT256:
            return f"receipt.{field} is not a whole number of base units"
    proof = view.get("proof")
    if not isinstance(proof, list) or not all(isinstance(p, str) and _BYTES32.match(p) for p in proof):
        return "proof is not a list of 32-byte hashes"
    if len(proof) > 64:
        return "proof is longer than any batch's"
    leaf = view.get("leaf")
    if leaf is not None and (not isinstance(leaf, str) or not _BYTES32.match(leaf)):
        return "leaf is not 32 bytes of hex"
    escrow = view.get("escrow")
    if escrow is not None and (not isinstance(escrow, str) or not _ADDRESS.match(escrow)):
        return "escrow is not an address"
    if view.get("chain_id") is not None and not _is_int(view.get("chain_id")):
        return "chain_id is not a chain id"
    tx = view.get("tx_hash")
    if tx is not None and (not isinstance(tx, str) or not _BYTES32.match(tx)):
        return "tx_hash is not a transaction hash"
    return None


class _Rpc:
    """JSON-RPC over httpx: a failure to get an answer is _Unreachable, an error answer _RpcError."""

    def __init__(self, url: str, client: httpx.Client) -> None:
        self.url = url
        self.client = client
        self.next_id = 0

    def __call__(self, method: str, params: List[Any]) -> Any:
        self.next_id += 1
        try:
            response = self.client.post(self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
            answer = response.json()
        except httpx.HTTPError as error:
            raise _Unreachable(str(error) or type(error).__name__) from error
        except ValueError as error:
            raise _Unreachable(f"its answer to {method} is not JSON (HTTP {response.status_code})") from error
        if not isinstance(answer, dict):
            raise _Unreachable(f"its answer to {method} is not JSON-RPC")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise _RpcError(error.get("code"), str(error.get("message", "error")))
        if "result" not in answer:
            raise _Unreachable(f"its answer to {method} is not JSON-RPC")
        return answer["result"]


def verify_receipt(
    receipt: Any,
    *,
    rpc_url: str,
    escrow: Optional[str] = None,
    call_id: Optional[str] = None,
    timeout: float = 10.0,
    http_client: Optional[httpx.Client] = None,
) -> VerifyReceiptResult:
    """Checks a call's receipt against the escrow's root on the chain at ``rpc_url``, and says what it proves
    (a ``ProvenReceipt``) or why it proves nothing (a ``ReceiptFailure``; ``result.ok`` tells them apart).
    Never raises for a bad receipt or an unreachable chain.

    ``escrow`` checks against that escrow rather than the one the receipt names; ``call_id`` is the call the
    receipt must be for.

    >>> result = verify_receipt(client.receipt(call_id), rpc_url="https://mainnet.base.org")
    >>> result.amount if result.ok else (result.code, result.message)
    """
    view = _unwrap(receipt)
    if view is None:
        return ReceiptFailure("invalid_receipt", "This is not a call receipt: expected the JSON object GET /v1/calls/:callId/receipt answers.")
    named = view.get("call_id") if isinstance(view.get("call_id"), str) else None
    if call_id is not None and named is not None and named.lower() != call_id.lower():
        return ReceiptFailure("tampered_receipt", f"This receipt is for call {named}, not for call {call_id}.", named)
    status = view.get("status")
    if status == "not_charged":
        return ReceiptFailure("unsettled", f"Call {named} was not charged: there is nothing to settle or prove.", named)
    if status == "unsettled":
        return ReceiptFailure("unsettled", f"Call {named} is charged but not settled yet: its batch has not been posted; ask again later.", named)
    problem = _problem(view)
    if problem is not None:
        return ReceiptFailure("invalid_receipt", f"This is not a valid call receipt: {problem}.", named)
    the_call: str = view["call_id"]
    r = view["receipt"]
    batch: int = view["batch_number"]

    # What the receipt says of itself, before anything is asked of the chain.
    if r["call_id"].lower() != call_id_to_bytes32(the_call):
        return ReceiptFailure("tampered_receipt", f"The receipt's call id {r['call_id']} is not call {the_call}: the receipt was changed.", the_call)
    amount, fee = int(r["amount"]), int(r["platform_fee"])
    if fee > amount:
        return ReceiptFailure("tampered_receipt", f"The receipt's platform fee ({fee}) exceeds its amount ({amount}): the receipt was changed.", the_call)
    leaf = "0x" + _leaf(r["call_id"], r["account"], r["seller"], amount, fee).hex()
    stated_leaf = view.get("leaf")
    if stated_leaf is not None and stated_leaf.lower() != leaf:
        return ReceiptFailure(
            "tampered_receipt",
            f"The receipt's fields do not hash to its leaf {stated_leaf} (they hash to {leaf}): "
            "its amount, fee, account, seller or call id was changed.",
            the_call,
        )
    computed_root = "0x" + _fold(bytes.fromhex(leaf[2:]), view["proof"]).hex()

    the_escrow = escrow if escrow is not None else view.get("escrow")
    if not isinstance(the_escrow, str) or not _ADDRESS.match(the_escrow):
        return ReceiptFailure("invalid_receipt", "The receipt names no escrow: pass the SkillEscrow's address (escrow=...).", the_call)

    owned = http_client is None
    client = http_client or httpx.Client(timeout=timeout)
    rpc = _Rpc(rpc_url, client)
    try:
        try:
            chain_id = int(rpc("eth_chainId", []), 16)
            code = rpc("eth_getCode", [the_escrow, "latest"])
        except (_Unreachable, _RpcError, ValueError, TypeError) as error:
            return ReceiptFailure("chain_unreachable", f"The chain at {rpc_url} did not answer: {error}. Nothing was verified.", the_call)
        stated_chain = view.get("chain_id")
        if stated_chain is not None and stated_chain != chain_id:
            return ReceiptFailure("wrong_chain", f"The receipt is for chain {stated_chain}, but {rpc_url} serves chain {chain_id}.", the_call)
        if not isinstance(code, str) or code in ("0x", ""):
            return ReceiptFailure("wrong_chain", f"There is no contract at {the_escrow} on chain {chain_id} ({rpc_url}).", the_call)
        not_escrow = ReceiptFailure(
            "wrong_chain", f"The contract at {the_escrow} on chain {chain_id} is not a SkillEscrow (it has no receiptsRoots).", the_call
        )
        try:
            data = "0x" + (_RECEIPTS_ROOTS + batch.to_bytes(32, "big")).hex()
            root = rpc("eth_call", [{"to": the_escrow, "data": data}, "latest"])
        except _RpcError:
            return not_escrow
        except _Unreachable as error:
            return ReceiptFailure("chain_unreachable", f"The chain at {rpc_url} did not answer: {error}. Nothing was verified.", the_call)
        if not isinstance(root, str) or not _BYTES32.match(root):
            return not_escrow
        root = root.lower()
        if root == _ZERO_ROOT:
            return ReceiptFailure(
                "unsettled",
                f"Batch {batch} is not on chain {chain_id} at escrow {the_escrow} yet: call {the_call} is not settled there; ask again later.",
                the_call,
            )
        if root != computed_root:
            why = "the receipt or its proof is not what the batch settled." if stated_leaf is None else "the proof is not this batch's."
            return ReceiptFailure(
                "wrong_proof",
                f"The proof does not lead from the receipt's leaf to batch {batch}'s root {root} on the escrow "
                f"(it leads to {computed_root}): {why}",
                the_call,
            )
        block_number, confirmations = _posted_at(rpc, view.get("tx_hash"), the_escrow, batch, root)
    finally:
        if owned:
            client.close()
    return ProvenReceipt(
        call_id=the_call,
        account=checksum_address(r["account"]),
        seller=checksum_address(r["seller"]),
        amount_micros=amount,
        seller_share_micros=amount - fee,
        platform_fee_micros=fee,
        batch_number=batch,
        receipts_root=root,
        leaf=leaf,
        escrow=checksum_address(the_escrow),
        chain_id=chain_id,
        block_number=block_number,
        tx_hash=view.get("tx_hash") if block_number is not None else None,
        confirmations=confirmations,
    )


def _posted_at(rpc: _Rpc, tx_hash: Any, escrow: str, batch: int, root: str) -> "tuple[Optional[int], Optional[int]]":
    """The block of the receipt's transaction, when the chain confirms it posted this batch with this root; else None.
    The proof stands on the root alone: the block is a detail the chain may not say (a pruned or unknown transaction)."""
    if not isinstance(tx_hash, str):
        return None, None
    try:
        tx: Dict[str, Any] = rpc("eth_getTransactionReceipt", [tx_hash]) or {}
        head = int(rpc("eth_blockNumber", []), 16)
        posted = tx.get("status") == "0x1" and any(
            str(log.get("address", "")).lower() == escrow.lower()
            and len(log.get("topics", [])) > 1
            and log["topics"][0].lower() == _BATCH_SETTLED
            and int(log["topics"][1], 16) == batch
            and str(log.get("data", ""))[:66].lower() == root
            for log in tx.get("logs", [])
        )
        if not posted:
            return None, None
        block = int(tx["blockNumber"], 16)
        return block, head - block + 1
    except (_Unreachable, _RpcError, ValueError, TypeError, KeyError, AttributeError):
        return None, None

"""verify_receipt against the local chain: a gateway that settles on the in-process Hardhat chain, served over
JSON-RPC on HTTP (tests/receipt_server.ts). Each test proves a receipt or shows the failure it must be."""

import copy
import json
import os
import select
import subprocess
import time
from typing import Any, Callable, Dict, Iterator

import pytest

from conftest import REPO
from skill_gateway import ProvenReceipt, ReceiptFailure, SkillGateway, verify_receipt
from skill_gateway._receipts import checksum_address

SERVER = os.path.join("clients", "python", "tests", "receipt_server.ts")


def _read_line(proc: "subprocess.Popen[str]", seconds: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            return proc.stdout.readline()
    return ""


@pytest.fixture(scope="module")
def chain() -> Iterator[Dict[str, Any]]:
    """The settling gateway, once for this module; ``chain["stop_gateway"]()`` stops its gateway for good."""
    proc = subprocess.Popen(
        ["node", "-r", "ts-node/register/transpile-only", SERVER],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = _read_line(proc, 180)
    if not line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the receipt test gateway did not start: {err[-2000:]}")
    info: Dict[str, Any] = json.loads(line)

    def stop_gateway() -> None:
        assert proc.stdin is not None
        proc.stdin.write("stop-gateway\n")
        proc.stdin.flush()
        assert _read_line(proc, 30).strip() == "stopped"

    info["stop_gateway"] = stop_gateway
    info["client"] = SkillGateway(api_key=info["key"], base_url=info["url"], max_retries=0)
    try:
        yield info
    finally:
        info["client"].close()
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def saved(chain: Dict[str, Any]) -> Dict[str, Any]:
    """The settled call's receipt as a user would save it: the endpoint's whole JSON answer, read back."""
    import httpx

    answer = httpx.get(f"{chain['url']}/v1/calls/{chain['call_id']}/receipt", headers={"authorization": f"Bearer {chain['key']}"})
    assert answer.status_code == 200, answer.text
    return json.loads(answer.text)


def edited(saved: Dict[str, Any], change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    copied = copy.deepcopy(saved)
    change(copied["data"])
    return copied


def failure(result: Any) -> ReceiptFailure:
    assert isinstance(result, ReceiptFailure), f"expected a failure, got {result}"
    assert result.ok is False
    return result


def test_proves_a_settled_call_fetched_through_the_client(chain: Dict[str, Any]) -> None:
    receipt = chain["client"].receipt(chain["call_id"])
    assert receipt["status"] == "settled"
    result = verify_receipt(receipt, rpc_url=chain["rpc_url"], call_id=chain["call_id"])
    assert isinstance(result, ProvenReceipt), result
    assert result.ok is True
    # echo costs $0.001: 1,000 micro-USDC, of which the platform's 10% fee is 100.
    assert (result.amount_micros, result.seller_share_micros, result.platform_fee_micros) == (1000, 900, 100)
    assert str(result.amount) == "0.001" and str(result.seller_share) == "0.0009" and str(result.platform_fee) == "0.0001"
    assert result.batch_number == chain["batch"]
    assert result.escrow == chain["escrow"]
    assert result.chain_id == 8453
    assert result.leaf == receipt["leaf"]
    assert result.receipts_root == receipt["receipts_root"]
    assert result.tx_hash == receipt["tx_hash"]
    assert isinstance(result.block_number, int) and result.block_number > 0
    assert isinstance(result.confirmations, int) and result.confirmations >= 1


def test_a_changed_amount_no_longer_hashes_to_the_leaf(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    def change(d: Dict[str, Any]) -> None:
        d["receipt"]["amount"] = "2000"

    result = failure(verify_receipt(edited(saved, change), rpc_url=chain["rpc_url"]))
    assert result.code == "tampered_receipt"
    assert "do not hash to its leaf" in result.message


def test_a_changed_amount_without_the_leaf_is_a_wrong_proof(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    def change(d: Dict[str, Any]) -> None:
        d["receipt"]["amount"] = "999999"
        del d["leaf"]

    assert failure(verify_receipt(edited(saved, change), rpc_url=chain["rpc_url"])).code == "wrong_proof"


def test_a_wrong_proof_sibling_does_not_reach_the_escrows_root(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    def change(d: Dict[str, Any]) -> None:
        d["proof"][0] = "0x" + "ab" * 32

    result = failure(verify_receipt(edited(saved, change), rpc_url=chain["rpc_url"]))
    assert result.code == "wrong_proof"
    assert f"batch {chain['batch']}'s root {saved['data']['receipts_root']}" in result.message


def test_another_calls_receipt_is_refused(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    result = failure(verify_receipt(saved, rpc_url=chain["rpc_url"], call_id=chain["other_call_id"]))
    assert result.code == "tampered_receipt"
    assert result.message == f"This receipt is for call {chain['call_id']}, not for call {chain['other_call_id']}."


def test_an_unsettled_call_and_a_batch_not_on_chain(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    answer = chain["client"].receipt(chain["waiting_call_id"])
    assert answer == {"call_id": chain["waiting_call_id"], "status": "unsettled"}
    result = failure(verify_receipt(answer, rpc_url=chain["rpc_url"]))
    assert (result.code, result.call_id) == ("unsettled", chain["waiting_call_id"])

    def ahead(d: Dict[str, Any]) -> None:
        d["batch_number"] = chain["batch"] + 5

    assert failure(verify_receipt(edited(saved, ahead), rpc_url=chain["rpc_url"])).code == "unsettled"


def test_an_unreachable_chain_and_a_wrong_one(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    down = failure(verify_receipt(saved, rpc_url="http://127.0.0.1:1", timeout=2.0))
    assert down.code == "chain_unreachable"
    assert down.message.startswith("The chain at http://127.0.0.1:1 did not answer: ")
    # The token is a contract, but not an escrow.
    assert failure(verify_receipt(saved, rpc_url=chain["rpc_url"], escrow=chain["usdc"])).code == "wrong_chain"

    def other_chain(d: Dict[str, Any]) -> None:
        d["chain_id"] = 1

    result = failure(verify_receipt(edited(saved, other_chain), rpc_url=chain["rpc_url"]))
    assert result.message == f"The receipt is for chain 1, but {chain['rpc_url']} serves chain 8453."


def test_what_is_not_a_receipt(chain: Dict[str, Any], saved: Dict[str, Any]) -> None:
    def negative(d: Dict[str, Any]) -> None:
        d["receipt"]["amount"] = "-1"

    for bad in [None, "x", [], {"call_id": chain["call_id"], "status": "settled"}, edited(saved, negative)]:
        assert failure(verify_receipt(bad, rpc_url=chain["rpc_url"])).code == "invalid_receipt", bad


def test_checksum_address_is_eip55() -> None:
    # EIP-55's own examples.
    for address in ["0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"]:
        assert checksum_address(address.lower()) == address


# Last in the module: it stops the gateway.
def test_a_saved_receipt_is_proven_with_the_gateway_stopped(chain: Dict[str, Any], saved: Dict[str, Any], tmp_path: Any) -> None:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(saved))
    chain["stop_gateway"]()
    import httpx

    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{chain['url']}/v1/skills", timeout=2.0)
    result = verify_receipt(json.loads(path.read_text()), rpc_url=chain["rpc_url"])
    assert isinstance(result, ProvenReceipt), result
    assert (result.call_id, result.amount_micros, result.batch_number) == (chain["call_id"], 1000, chain["batch"])

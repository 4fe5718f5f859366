// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {_packValidationData} from "@account-abstraction/contracts/core/Helpers.sol";
import {UserOperationLib} from "@account-abstraction/contracts/core/UserOperationLib.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title GatewayPaymaster
/// @notice An ERC-4337 (EntryPoint v0.7) paymaster that pays gas for exactly two kinds of UserOperation of an
///         embedded wallet (a SimpleAccount), and only when the gateway's signer approved that very operation
///         (VerifyingPaymaster-style):
///         - the deposit flow, moving its USDC into the escrow:
///           `executeBatch([usdc, escrow], [0, 0], [approve(escrow, amount), depositFor(sender, amount)])`;
///         - the claim flow, taking the seller earnings the escrow credited to it:
///           `execute(escrow, 0, claim())` or `execute(escrow, 0, claimTo(recipient))`, recipient not zero;
///         - the withdrawal flow, redeeming a gateway voucher for the sender's own escrow balance and passing the
///           USDC straight on, in one operation (so the wallet sweep never sees it):
///           `executeBatch([escrow, token], [0, 0], [withdrawWithVoucher(voucher, signature), transfer(to, amount)])`
///           with voucher.account the sender, `amount` the voucher's, `to` not zero.
/// @dev Two independent checks: the gateway signs only its own flows, and even a signed operation is refused
///      unless its calldata is one of those flows to this paymaster's token and escrow, for the sender's own
///      balance or earnings. A leaked signer key can therefore only make the paymaster pay for deposits into the
///      escrow, for sellers taking out what the escrow already owes them, and for an account redeeming a voucher
///      (which the escrow checks against the voucher signer, a separate key) for its own balance.
///
///      paymasterAndData = paymaster (20) | verification gas (16) | post-op gas (16)
///                         | abi.encode(uint48 validUntil, uint48 validAfter) (64) | signature (65)
contract GatewayPaymaster is BasePaymaster {
    using UserOperationLib for PackedUserOperation;

    /// @notice The token the escrow holds (USDC).
    address public immutable token;
    /// @notice The SkillEscrow deposits go to.
    address public immutable escrow;
    /// @notice The only factory a sponsored operation may deploy its account with (empty initCode is fine too).
    address public immutable accountFactory;
    /// @notice The gateway key that approves each sponsored operation. Rotating it means a new paymaster.
    address public immutable verifyingSigner;

    bytes4 private constant EXECUTE_BATCH = bytes4(keccak256("executeBatch(address[],uint256[],bytes[])"));
    bytes4 private constant EXECUTE = bytes4(keccak256("execute(address,uint256,bytes)"));
    bytes4 private constant APPROVE = bytes4(keccak256("approve(address,uint256)"));
    bytes4 private constant DEPOSIT_FOR = bytes4(keccak256("depositFor(address,uint256)"));
    bytes4 private constant CLAIM = bytes4(keccak256("claim()"));
    bytes4 private constant CLAIM_TO = bytes4(keccak256("claimTo(address)"));
    bytes4 private constant WITHDRAW_WITH_VOUCHER =
        bytes4(keccak256("withdrawWithVoucher((address,uint256,uint256,uint256),bytes)"));
    bytes4 private constant TRANSFER = bytes4(keccak256("transfer(address,uint256)"));
    /// @dev withdrawWithVoucher's standard encoding with a 65-byte signature: selector, the four voucher words, the
    ///      signature's offset (0xa0), its length (65) and its bytes padded to three words.
    uint256 private constant WITHDRAW_CALL_LENGTH = 4 + 32 * 4 + 32 + 32 + 96;

    uint256 private constant VALID_TIMESTAMP_OFFSET = PAYMASTER_DATA_OFFSET;
    uint256 private constant SIGNATURE_OFFSET = VALID_TIMESTAMP_OFFSET + 64;

    // Why an operation is not one of the gateway's flows: one error per refusal, each naming the part refused.
    // server/wallets/aa-flows.ts refuses the same operations, off chain, with the same errors and arguments.

    /// @notice The account would be deployed by `factory`, not by accountFactory (zero: initCode shorter than an address).
    error PaymasterUnknownFactory(address factory);
    /// @notice The account call's `selector` is neither executeBatch nor execute (zero: calldata shorter than a selector).
    error PaymasterUnknownSelector(bytes4 selector);
    /// @notice An executeBatch whose arrays (targets, values, calls) do not each hold exactly two entries.
    error PaymasterNotTwoCalls(uint256 targets, uint256 values, uint256 calls);
    /// @notice A deposit whose calls go to `first` and `second`, not to the token and then the escrow.
    error PaymasterDepositTargets(address first, address second);
    /// @notice A deposit sending ETH along with its calls.
    error PaymasterDepositValue(uint256 first, uint256 second);
    /// @notice A deposit whose first call is not approve(escrow, amount): its `selector` and `spender` (both zero when
    ///         the call is not a selector and two clean words).
    error PaymasterDepositApprove(bytes4 selector, address spender);
    /// @notice A deposit whose second call is not depositFor(sender, amount): its `selector` and `account` (both zero
    ///         when the call is not a selector and two clean words).
    error PaymasterDepositFor(bytes4 selector, address account);
    /// @notice A deposit approving another amount than it deposits, or depositing zero.
    error PaymasterDepositAmount(uint256 approved, uint256 deposited);
    /// @notice A claim sent to `target`, not to the escrow.
    error PaymasterClaimTarget(address target);
    /// @notice A claim sending ETH along.
    error PaymasterClaimValue(uint256 value);
    /// @notice A claim whose call (`selector`, zero if shorter, and its `length` in bytes) is neither claim() nor
    ///         claimTo(address) in the standard encoding.
    error PaymasterClaimCall(bytes4 selector, uint256 length);
    /// @notice claimTo(address(0)), which the escrow would refuse anyway.
    error PaymasterClaimToZero();
    /// @notice A claim whose execute calldata is not the standard encoding of its arguments.
    error PaymasterClaimEncoding();
    /// @notice A withdrawal sending ETH along with its calls.
    error PaymasterWithdrawValue(uint256 first, uint256 second);
    /// @notice A withdrawal whose first call (`selector`, zero if shorter, and its `length` in bytes) is not
    ///         withdrawWithVoucher(voucher, 65-byte signature) in the standard encoding.
    error PaymasterWithdrawCall(bytes4 selector, uint256 length);
    /// @notice A withdrawal redeeming the voucher of `account`, not of the operation's `sender`.
    error PaymasterWithdrawAccount(address account, address sender);
    /// @notice A withdrawal whose second call (`selector`, zero if shorter, and its `length` in bytes) is not
    ///         transfer(to, amount) in the standard encoding.
    error PaymasterTransferCall(bytes4 selector, uint256 length);
    /// @notice A withdrawal passing the USDC on to address(0).
    error PaymasterTransferToZero();
    /// @notice A withdrawal passing on `transferred`, not the voucher's `voucherAmount`, or a voucher of zero.
    error PaymasterWithdrawAmount(uint256 voucherAmount, uint256 transferred);
    /// @notice A withdrawal whose executeBatch calldata is not the standard encoding of its arguments.
    error PaymasterWithdrawEncoding();

    constructor(
        IEntryPoint entryPoint_,
        address token_,
        address escrow_,
        address accountFactory_,
        address verifyingSigner_
    ) BasePaymaster(entryPoint_) {
        token = token_;
        escrow = escrow_;
        accountFactory = accountFactory_;
        verifyingSigner = verifyingSigner_;
    }

    /// @notice What the gateway signs (as an EIP-191 message): every field of the operation except the
    ///         signature part of paymasterAndData, plus the chain, this paymaster and the validity window.
    /// @param userOp The operation (its paymasterAndData's signature part is not covered).
    /// @param validUntil Last second the approval is good.
    /// @param validAfter First second the approval is good.
    /// @return The hash the gateway signs as an EIP-191 message.
    function getHash(PackedUserOperation calldata userOp, uint48 validUntil, uint48 validAfter) public view returns (bytes32) {
        return keccak256(
            abi.encode(
                userOp.getSender(),
                userOp.nonce,
                keccak256(userOp.initCode),
                keccak256(userOp.callData),
                userOp.accountGasLimits,
                uint256(bytes32(userOp.paymasterAndData[PAYMASTER_VALIDATION_GAS_OFFSET:PAYMASTER_DATA_OFFSET])),
                userOp.preVerificationGas,
                userOp.gasFees,
                block.chainid,
                address(this),
                validUntil,
                validAfter
            )
        );
    }

    /// @notice Splits the paymaster-specific part of paymasterAndData into the validity window and the signature.
    /// @param paymasterAndData The operation's whole paymasterAndData.
    /// @return validUntil Last second the approval is good (0: forever).
    /// @return validAfter First second the approval is good.
    /// @return signature The gateway signer's signature over {getHash}, EIP-191.
    function parsePaymasterAndData(bytes calldata paymasterAndData)
        public
        pure
        returns (uint48 validUntil, uint48 validAfter, bytes calldata signature)
    {
        (validUntil, validAfter) = abi.decode(paymasterAndData[VALID_TIMESTAMP_OFFSET:SIGNATURE_OFFSET], (uint48, uint48));
        signature = paymasterAndData[SIGNATURE_OFFSET:];
    }

    /// @notice Reverts with one of the Paymaster* errors unless `userOp` is one of the gateway's flows (deposit,
    ///         claim, withdrawal).
    /// @dev Calldata that does not even decode as its selector's arguments reverts without data.
    /// @param userOp The operation to check; only its initCode, sender and callData are read.
    function checkGatewayFlow(PackedUserOperation calldata userOp) public view {
        bytes calldata initCode = userOp.initCode;
        if (initCode.length != 0 && (initCode.length < 20 || address(bytes20(initCode[:20])) != accountFactory)) {
            revert PaymasterUnknownFactory(initCode.length < 20 ? address(0) : address(bytes20(initCode[:20])));
        }
        bytes calldata callData = userOp.callData;
        bytes4 selector = callData.length < 4 ? bytes4(0) : bytes4(callData[:4]);
        if (selector == EXECUTE_BATCH) _checkBatchFlow(userOp.sender, callData);
        else if (selector == EXECUTE) _checkClaimFlow(callData);
        else revert PaymasterUnknownSelector(selector);
    }

    /// @dev The two-call flows: a withdrawal when the first call goes to the escrow and the second to the token,
    ///      else a deposit (whose refusals name the deposit's parts).
    function _checkBatchFlow(address sender, bytes calldata callData) private view {
        (address[] memory dest, uint256[] memory value, bytes[] memory func) =
            abi.decode(callData[4:], (address[], uint256[], bytes[]));
        if (dest.length != 2 || value.length != 2 || func.length != 2) {
            revert PaymasterNotTwoCalls(dest.length, value.length, func.length);
        }
        if (dest[0] == escrow && dest[1] == token) _checkWithdrawFlow(sender, callData, dest, value, func);
        else _checkDepositFlow(sender, dest, value, func);
    }

    /// @dev `executeBatch([token, escrow], [0, 0], [approve(escrow, amount), depositFor(sender, amount)])`.
    function _checkDepositFlow(address sender, address[] memory dest, uint256[] memory value, bytes[] memory func)
        private
        view
    {
        if (dest[0] != token || dest[1] != escrow) revert PaymasterDepositTargets(dest[0], dest[1]);
        if (value[0] != 0 || value[1] != 0) revert PaymasterDepositValue(value[0], value[1]);
        (bytes4 approveSelector, address spender, uint256 approved) = _twoWordCall(func[0]);
        (bytes4 depositSelector, address account, uint256 deposited) = _twoWordCall(func[1]);
        if (approveSelector != APPROVE || spender != escrow) revert PaymasterDepositApprove(approveSelector, spender);
        if (depositSelector != DEPOSIT_FOR || account != sender) revert PaymasterDepositFor(depositSelector, account);
        if (approved != deposited || deposited == 0) revert PaymasterDepositAmount(approved, deposited);
    }

    /// @dev `execute(escrow, 0, claim())` or `execute(escrow, 0, claimTo(recipient))` with a non-zero recipient,
    ///      in the standard ABI encoding and nothing more: the escrow pays msg.sender's own earnings, so the
    ///      sender can only take what it is owed, to itself or to the recipient it names.
    function _checkClaimFlow(bytes calldata callData) private view {
        (address dest, uint256 value, bytes memory func) = abi.decode(callData[4:], (address, uint256, bytes));
        if (dest != escrow) revert PaymasterClaimTarget(dest);
        if (value != 0) revert PaymasterClaimValue(value);
        bytes4 selector;
        uint256 word;
        if (func.length >= 4) {
            assembly ("memory-safe") {
                selector := mload(add(func, 32))
                word := mload(add(func, 36))
            }
        }
        if (func.length == 36 && selector == CLAIM_TO) {
            if (word >> 160 != 0) revert PaymasterClaimCall(selector, func.length);
            if (word == 0) revert PaymasterClaimToZero();
        } else if (func.length != 4 || selector != CLAIM) {
            revert PaymasterClaimCall(selector, func.length);
        }
        // One encoding only (no extra words, no odd offsets): what the gateway signed is what the account runs.
        if (keccak256(callData) != keccak256(abi.encodeWithSelector(EXECUTE, dest, value, func))) {
            revert PaymasterClaimEncoding();
        }
    }

    /// @dev `executeBatch([escrow, token], [0, 0], [withdrawWithVoucher(voucher, signature), transfer(to, amount)])`
    ///      with voucher.account == sender, amount == voucher.amount != 0, to != 0, every part in the standard ABI
    ///      encoding. The escrow pays voucher.account, so the sender can only take its own balance, and only as far
    ///      as a voucher the escrow's voucher signer issued allows; the transfer passes exactly that amount on.
    function _checkWithdrawFlow(
        address sender,
        bytes calldata callData,
        address[] memory dest,
        uint256[] memory value,
        bytes[] memory func
    ) private pure {
        if (value[0] != 0 || value[1] != 0) revert PaymasterWithdrawValue(value[0], value[1]);
        bytes memory withdraw = func[0];
        if (withdraw.length != WITHDRAW_CALL_LENGTH) revert PaymasterWithdrawCall(_selectorOf(withdraw), withdraw.length);
        bytes4 selector;
        uint256 account;
        uint256 voucherAmount;
        uint256 signatureOffset;
        uint256 signatureLength;
        uint256 lastWord;
        assembly ("memory-safe") {
            let data := add(withdraw, 32)
            selector := mload(data)
            account := mload(add(data, 4))
            voucherAmount := mload(add(data, 36))
            signatureOffset := mload(add(data, 132))
            signatureLength := mload(add(data, 164))
            lastWord := mload(add(data, 260))
        }
        // The signature's 65 bytes end one byte into the last word; the 31 after them are padding and must be zero.
        if (
            selector != WITHDRAW_WITH_VOUCHER || signatureOffset != 0xa0 || signatureLength != 65
                || lastWord << 8 != 0 || account >> 160 != 0
        ) revert PaymasterWithdrawCall(selector, withdraw.length);
        if (address(uint160(account)) != sender) revert PaymasterWithdrawAccount(address(uint160(account)), sender);
        (bytes4 transferSelector, address to, uint256 transferred) = _twoWordCall(func[1]);
        if (transferSelector != TRANSFER) revert PaymasterTransferCall(_selectorOf(func[1]), func[1].length);
        if (to == address(0)) revert PaymasterTransferToZero();
        if (transferred != voucherAmount || voucherAmount == 0) revert PaymasterWithdrawAmount(voucherAmount, transferred);
        // One encoding only (no extra words, no odd offsets): what the gateway signed is what the account runs.
        if (keccak256(callData) != keccak256(abi.encodeWithSelector(EXECUTE_BATCH, dest, value, func))) {
            revert PaymasterWithdrawEncoding();
        }
    }

    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32, uint256)
        internal
        view
        override
        returns (bytes memory context, uint256 validationData)
    {
        checkGatewayFlow(userOp);
        (uint48 validUntil, uint48 validAfter, bytes calldata signature) = parsePaymasterAndData(userOp.paymasterAndData);
        bytes32 hash = MessageHashUtils.toEthSignedMessageHash(getHash(userOp, validUntil, validAfter));
        // A malformed or foreign signature is a failed validation, not a revert: bundlers estimate gas with
        // a placeholder signature and need the rest of validation to run.
        (address recovered, ECDSA.RecoverError error_,) = ECDSA.tryRecover(hash, signature);
        bool failed = error_ != ECDSA.RecoverError.NoError || recovered != verifyingSigner;
        return ("", _packValidationData(failed, validUntil, validAfter));
    }

    /// @dev The first four bytes of `data`, or zero when it is shorter.
    function _selectorOf(bytes memory data) private pure returns (bytes4 selector) {
        if (data.length < 4) return bytes4(0);
        assembly ("memory-safe") {
            selector := mload(add(data, 32))
        }
    }

    /// @dev Splits `selector(address, uint256)` calldata; anything of another length yields a zero selector.
    function _twoWordCall(bytes memory data) private pure returns (bytes4 selector, address first, uint256 second) {
        if (data.length != 68) return (bytes4(0), address(0), 0);
        uint256 word;
        assembly ("memory-safe") {
            selector := mload(add(data, 32))
            word := mload(add(data, 36))
            second := mload(add(data, 68))
        }
        if (word >> 160 != 0) return (bytes4(0), address(0), 0);
        first = address(uint160(word));
    }
}

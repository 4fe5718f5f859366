// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IERC3009Bytes} from "./IERC3009Bytes.sol";

/// @title SkillEscrow
/// @notice Holds the USDC that accounts prepay for skill calls. The gateway bills calls off-chain and moves money
///         here only by posting settlement batches: each batch debits accounts, credits sellers and the platform
///         treasury, and records the Merkle root of the call receipts it settles. Calls paid with x402 (an
///         EIP-3009 authorization, no account) are paid one by one, before their work: the payer's USDC comes
///         straight into the escrow, pending, and is credited to the seller and the treasury when the call succeeds or
///         refunded to the payer when it fails (or reclaimed by the payer if the gateway does neither within a day).
///         Sellers and the treasury claim what they earned, from both kinds of call alike. An account gets its unspent
///         funds back either at once with a voucher signed by the gateway, or without the gateway at all through a
///         timed exit.
/// @dev Invariant (checked by the property tests after every step): the escrow's USDC balance equals the sum of
///      all `balances` plus the sum of all `earnings` plus `x402PendingTotal`. Pending exits are not a separate pot:
///      the requested amount stays in the account's balance until `completeExit`, so a batch posted during the delay
///      can still debit it. Tokens that reach the escrow outside its functions (a plain transfer, or an x402
///      authorization submitted to the token by someone else, see {collectX402}) are owed to no one and can only
///      make the balance exceed that sum; no function can take them out.
contract SkillEscrow is AccessControl, Pausable, ReentrancyGuardTransient, EIP712 {
    using SafeERC20 for IERC20;

    // ---------------------------------------------------------------------------------------------------------
    // Types
    // ---------------------------------------------------------------------------------------------------------

    /// @notice What one account paid in a batch, in USDC base units.
    struct Debit {
        address account;
        uint256 amount;
    }

    /// @notice What one seller earned in a batch, in USDC base units.
    struct Credit {
        address seller;
        uint256 amount;
    }

    /// @notice One settlement batch.
    /// @dev Amounts are deltas (what this batch moves), not cumulative totals. Batch numbers are strictly
    ///      consecutive and each number is accepted once, so a delta can be neither applied twice nor skipped,
    ///      which is the safety that cumulative totals would otherwise buy. Deltas keep every batch
    ///      self-checking (its debits equal its credits plus its fee), need no stored "settled so far" total per
    ///      account and per seller (cumulative amounts would cost an extra storage read and write per entry just
    ///      to compute the difference), keep calldata cheap (small numbers are mostly zero bytes), and compose
    ///      with deposits, vouchers and exits that change the same balances between batches.
    /// @param number Must be `lastBatchNumber + 1`.
    /// @param receiptsRoot Merkle root of the call receipts settled by this batch, see {receiptLeaf}.
    /// @param callCount How many calls the batch settles (informational, emitted in {BatchSettled}).
    /// @param debits Per-account debits, each non-zero and at most the account's balance when applied.
    /// @param credits Per-seller credits, each non-zero.
    /// @param platformFee The platform's share, credited to the treasury.
    struct Batch {
        uint256 number;
        bytes32 receiptsRoot;
        uint256 callCount;
        Debit[] debits;
        Credit[] credits;
        uint256 platformFee;
    }

    /// @notice A gateway-signed permission for `account` to withdraw `amount` now.
    struct Voucher {
        address account;
        uint256 amount;
        uint256 nonce;
        uint256 deadline;
    }

    /// @notice One x402 payment: the payer's EIP-3009 authorization (the `exact` scheme's payload, whose `to` is
    ///         this escrow) and how the gateway splits it.
    /// @dev `from`, `value`, `validAfter`, `validBefore` and `nonce` are the authorization's fields, passed to the
    ///      token unchanged with `to = address(this)`; the token checks the signature over them, so a payment whose
    ///      fields differ from what the payer signed fails there. `seller`, `platformFee` and `callId` are the
    ///      gateway's and are not signed by the payer.
    /// @param from The payer, signer of the authorization.
    /// @param value The price in base units; the authorization's value.
    /// @param validAfter The authorization is valid strictly after this time (x402 clients sign 0).
    /// @param validBefore The authorization is valid strictly before this time.
    /// @param nonce The authorization's EIP-3009 nonce (random, single use per payer, enforced by the token).
    /// @param seller Credited `value - platformFee`.
    /// @param platformFee Credited to the treasury; at most `value`.
    /// @param callId The gateway's call id: the pending payment's key, emitted in every x402 event to tie it to its call.
    struct X402Payment {
        address from;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
        address seller;
        uint256 platformFee;
        bytes32 callId;
    }

    /// @notice An x402 payment collected into the escrow and not yet completed, refunded or reclaimed: what
    ///         {X402Collected} emits, and what {completeX402}, {refundX402} and {reclaimX402} are given back.
    /// @param payer Who paid, and who gets the value back on a refund or a reclaim.
    /// @param seller Credited `value - platformFee` on completion.
    /// @param value What was collected, in base units.
    /// @param platformFee Credited to the treasury on completion; at most `value`.
    /// @param reclaimableAt From this time on the payer may take the payment back while it is still pending.
    struct X402Pending {
        address payer;
        address seller;
        uint256 value;
        uint256 platformFee;
        uint256 reclaimableAt;
    }

    /// @notice The state every batch reads and writes, packed into one storage slot: a settle pays for one
    ///         storage read and one write here instead of two of each.
    struct Settlement {
        address treasury;
        uint64 lastBatchNumber;
    }

    /// @notice A pending unilateral exit. `readyAt == 0` means none.
    struct Exit {
        uint256 amount;
        uint256 readyAt;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Constants and state
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Role allowed to post settlement batches and to collect, complete and refund x402 payments.
    bytes32 public constant SETTLER_ROLE = keccak256("SETTLER_ROLE");
    /// @notice Role whose EIP-712 signatures make vouchers valid.
    bytes32 public constant VOUCHER_SIGNER_ROLE = keccak256("VOUCHER_SIGNER_ROLE");
    /// @notice EIP-712 type hash of {Voucher}.
    bytes32 public constant VOUCHER_TYPEHASH =
        keccak256("Voucher(address account,uint256 amount,uint256 nonce,uint256 deadline)");

    /// @notice Minimum deposit at deployment: 1 USDC.
    uint256 public constant DEFAULT_MIN_DEPOSIT = 1_000_000;
    /// @notice Exit delay at deployment.
    uint256 public constant DEFAULT_EXIT_DELAY = 24 hours;
    /// @notice Lower bound of the exit delay: long enough for the settler to post what the account already spent.
    uint256 public constant MIN_EXIT_DELAY = 1 hours;
    /// @notice Upper bound of the exit delay: the admin can never lock funds for longer than this.
    uint256 public constant MAX_EXIT_DELAY = 7 days;

    /// @notice How long after collection a pending x402 payment can be reclaimed by its payer: far longer than any
    ///         call and its completion take, so it only matters when the gateway stopped. A constant: no one can
    ///         lengthen a payer's wait.
    uint256 public constant X402_RECLAIM_DELAY = 1 days;

    /// @notice The token held in escrow (USDC).
    IERC20 public immutable usdc;

    /// @notice Smallest accepted deposit, in base units.
    uint256 public minDeposit;
    /// @notice Delay between {requestExit} and {completeExit}, in seconds.
    uint256 public exitDelay;

    /// @dev The treasury and the last batch number; see {treasury} and {lastBatchNumber}.
    Settlement private _settlement;

    /// @notice Unspent escrowed funds per account.
    mapping(address account => uint256 amount) public balances;
    /// @notice Settled, unclaimed earnings per seller (and the treasury).
    mapping(address seller => uint256 amount) public earnings;
    /// @notice Receipts root recorded by each settled batch.
    mapping(uint256 batchNumber => bytes32 root) public receiptsRoots;
    /// @notice Whether a voucher nonce of an account has been used.
    mapping(address account => mapping(uint256 nonce => bool used)) public voucherNonceUsed;

    mapping(address account => Exit) private _exits;

    /// @notice The pending x402 payment of each call id: the hash of its {X402Pending} ({hashX402Pending}), zero
    ///         when there is none (never collected, or completed, refunded or reclaimed).
    mapping(bytes32 callId => bytes32 commitment) public x402Pending;
    /// @dev The sum of every pending x402 payment's value, plus one: the slot never returns to zero, so a collection
    ///      when nothing else is pending pays for a non-zero write (about 17,000 gas less than a zero-to-non-zero one),
    ///      as OpenZeppelin's ReentrancyGuard keeps its status at 1 or 2. Read it through {x402PendingTotal}.
    uint256 private _x402PendingTotalPlusOne = 1;

    // ---------------------------------------------------------------------------------------------------------
    // Events
    // ---------------------------------------------------------------------------------------------------------

    /// @notice `from` paid `amount` into `account`'s escrowed balance, which is now `balance`.
    event Deposited(address indexed account, address indexed from, uint256 amount, uint256 balance);
    /// @notice A batch debited `amount` from `account`, leaving `balance`.
    /// @dev The batch number is not repeated here: it is in the {BatchSettled} event of the same transaction.
    ///      Per-entry events are emitted once per account and seller, so every topic and word counts (a topic
    ///      costs 375 gas, a data word 256): this keeps what a wallet filters on (the account) and what it shows
    ///      (amount, balance left).
    event AccountDebited(address indexed account, uint256 amount, uint256 balance);
    /// @notice A batch credited `amount` to `seller`'s earnings (batch number: see {AccountDebited}).
    event SellerCredited(address indexed seller, uint256 amount);
    /// @notice Batch `batchNumber` was applied; `platformFee` went to `treasury`.
    event BatchSettled(
        uint256 indexed batchNumber,
        bytes32 receiptsRoot,
        uint256 callCount,
        uint256 totalDebits,
        uint256 platformFee,
        address treasury
    );
    /// @notice x402 call `callId`: `payer` paid `amount` into the escrow, pending until the call ends (the gateway
    ///         completes or refunds it); the payer may reclaim it from `reclaimableAt` on if it is still pending.
    event X402Collected(
        bytes32 indexed callId,
        address indexed payer,
        address indexed seller,
        uint256 amount,
        uint256 platformFee,
        uint256 reclaimableAt
    );
    /// @notice x402 call `callId`'s pending payment was completed: `seller` was credited `amount - platformFee` and
    ///         `treasury` `platformFee`.
    event X402Settled(
        bytes32 indexed callId,
        address indexed payer,
        address indexed seller,
        uint256 amount,
        uint256 platformFee,
        address treasury
    );
    /// @notice x402 call `callId`'s pending payment of `amount` went back to `payer`: refunded by the gateway (the call
    ///         failed), or reclaimed (`reclaimed`) after the gateway left it pending too long.
    event X402Refunded(bytes32 indexed callId, address indexed payer, uint256 amount, bool reclaimed);
    /// @notice `seller` withdrew `amount` of earnings to `recipient`.
    event Claimed(address indexed seller, address indexed recipient, uint256 amount);
    /// @notice `account` withdrew `amount` with voucher `nonce`, leaving `balance`.
    event VoucherRedeemed(address indexed account, uint256 indexed nonce, uint256 amount, uint256 balance);
    /// @notice `account` asked to exit with `amount`, payable from `readyAt` on.
    event ExitRequested(address indexed account, uint256 amount, uint256 readyAt);
    /// @notice `account` withdrew its pending exit request of `amount`.
    event ExitCancelled(address indexed account, uint256 amount);
    /// @notice `account` completed an exit of `requested`, was paid `paid`, and has `balance` left.
    event ExitCompleted(address indexed account, uint256 requested, uint256 paid, uint256 balance);
    /// @notice The minimum deposit changed.
    event MinDepositChanged(uint256 previous, uint256 current);
    /// @notice The exit delay changed (pending exits keep their `readyAt`).
    event ExitDelayChanged(uint256 previous, uint256 current);
    /// @notice The treasury changed.
    event TreasuryChanged(address indexed previous, address indexed current);

    // ---------------------------------------------------------------------------------------------------------
    // Errors
    // ---------------------------------------------------------------------------------------------------------

    /// @notice `account` is not acceptable here (the zero address).
    error EscrowInvalidAccount(address account);
    /// @notice An amount that must be positive was zero.
    error EscrowZeroAmount();
    /// @notice Deposits are paused.
    error EscrowDepositsPaused();
    /// @notice `amount` is below the minimum deposit `minimum`.
    error EscrowDepositBelowMinimum(uint256 amount, uint256 minimum);
    /// @notice The permit for `owner` failed and no usable allowance of `amount` exists.
    error EscrowPermitFailed(address owner, uint256 amount);
    /// @notice `account` holds `balance` but `needed` was asked for.
    error EscrowInsufficientBalance(address account, uint256 balance, uint256 needed);
    /// @notice Batch `got` arrived but `expected` is next.
    error EscrowBatchOutOfOrder(uint256 expected, uint256 got);
    /// @notice Batch `batchNumber` has no debits.
    error EscrowEmptyBatch(uint256 batchNumber);
    /// @notice Batch `batchNumber` has a zero receipts root.
    error EscrowMissingReceiptsRoot(uint256 batchNumber);
    /// @notice A batch's debits do not equal its credits plus its fee.
    error EscrowBatchUnbalanced(uint256 debits, uint256 credits, uint256 platformFee);
    /// @notice `seller` has no earnings to claim.
    error EscrowNothingToClaim(address seller);
    /// @notice The voucher's `deadline` is before the block time `timestamp`.
    error EscrowVoucherExpired(uint256 deadline, uint256 timestamp);
    /// @notice Voucher `nonce` of `account` was already used.
    error EscrowVoucherNonceUsed(address account, uint256 nonce);
    /// @notice The voucher was signed by `signer`, which does not hold VOUCHER_SIGNER_ROLE (zero if unreadable).
    error EscrowInvalidVoucherSigner(address signer);
    /// @notice `account` has no pending exit.
    error EscrowNoPendingExit(address account);
    /// @notice `account`'s exit is payable from `readyAt`; it is `timestamp`.
    error EscrowExitNotReady(address account, uint256 readyAt, uint256 timestamp);
    /// @notice `delay` is outside [`minimum`, `maximum`].
    error EscrowExitDelayOutOfBounds(uint256 delay, uint256 minimum, uint256 maximum);
    /// @notice A platform fee of `platformFee` was asked on a payment of only `amount`.
    error EscrowFeeExceedsAmount(uint256 platformFee, uint256 amount);
    /// @notice Call id `callId` already has a pending x402 payment.
    error EscrowX402PaymentExists(bytes32 callId);
    /// @notice Call id `callId` has no pending x402 payment with the fields given (none collected, already
    ///         completed, refunded or reclaimed, or other fields than were collected).
    error EscrowX402PaymentNotPending(bytes32 callId);
    /// @notice Call id `callId`'s pending payment can be reclaimed from `reclaimableAt`; it is `timestamp`.
    error EscrowX402NotReclaimable(bytes32 callId, uint256 reclaimableAt, uint256 timestamp);
    /// @notice The token call should have raised the escrow's balance by `expected` but raised it by `received`
    ///         (zero if it did not rise at all).
    error EscrowTransferShortfall(uint256 expected, uint256 received);

    // ---------------------------------------------------------------------------------------------------------
    // Construction
    // ---------------------------------------------------------------------------------------------------------

    /// @param usdc_ The escrowed token (USDC, 6 decimals).
    /// @param admin Receives DEFAULT_ADMIN_ROLE: manages roles, the minimum deposit, the exit delay, the treasury
    ///        and the deposit pause.
    /// @param treasury_ Receiver of platform fees.
    constructor(IERC20 usdc_, address admin, address treasury_) EIP712("SkillEscrow", "1") {
        if (address(usdc_) == address(0)) revert EscrowInvalidAccount(address(0));
        if (admin == address(0)) revert EscrowInvalidAccount(address(0));
        if (treasury_ == address(0)) revert EscrowInvalidAccount(address(0));
        usdc = usdc_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _settlement.treasury = treasury_;
        emit TreasuryChanged(address(0), treasury_);
        minDeposit = DEFAULT_MIN_DEPOSIT;
        emit MinDepositChanged(0, DEFAULT_MIN_DEPOSIT);
        exitDelay = DEFAULT_EXIT_DELAY;
        emit ExitDelayChanged(0, DEFAULT_EXIT_DELAY);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Deposits (pausable)
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Moves `amount` USDC from the caller into the caller's escrowed balance.
    /// @dev Needs an allowance. Reverts with EscrowDepositsPaused, EscrowDepositBelowMinimum.
    /// @param amount Base units, at least `minDeposit`.
    function deposit(uint256 amount) external nonReentrant {
        _deposit(msg.sender, msg.sender, amount);
    }

    /// @notice Moves `amount` USDC from the caller into `account`'s escrowed balance (e.g. the gateway or a
    ///         smart wallet topping up a user).
    /// @dev Reverts with EscrowDepositsPaused, EscrowInvalidAccount, EscrowDepositBelowMinimum.
    /// @param account Credited account, not zero.
    /// @param amount Base units, at least `minDeposit`.
    function depositFor(address account, uint256 amount) external nonReentrant {
        _deposit(msg.sender, account, amount);
    }

    /// @notice Deposits `amount` of `owner`'s USDC into `owner`'s escrowed balance using an EIP-2612 permit
    ///         signed by `owner` for this contract. Anyone may submit it (a relayer pays the gas); the funds
    ///         can only land in `owner`'s own balance.
    /// @dev If the permit call fails (for instance a front-runner already used it), the deposit still goes
    ///      through when `owner` itself is the caller and an allowance of `amount` exists; otherwise it reverts
    ///      with EscrowPermitFailed. Other reverts as {deposit}.
    /// @param owner Token holder who signed the permit, and the credited account.
    /// @param amount Base units, at least `minDeposit`; also the permit's value.
    /// @param deadline Permit deadline.
    function depositWithPermit(
        address owner,
        uint256 amount,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external nonReentrant {
        _checkDeposit(owner, amount);
        try IERC20Permit(address(usdc)).permit(owner, address(this), amount, deadline, v, r, s) {} catch {
            // Only the owner may fall back to an existing allowance: a third party must not be able to push
            // someone's approved tokens into the escrow without that person's fresh signature.
            if (msg.sender != owner || usdc.allowance(owner, address(this)) < amount) {
                revert EscrowPermitFailed(owner, amount);
            }
        }
        _deposit(owner, owner, amount);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Settlement
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Applies settlement batch `batch`: debits accounts, credits sellers and the treasury, records the
    ///         receipts root. Only SETTLER_ROLE.
    /// @dev All-or-nothing. Guarantees: `batch.number == lastBatchNumber + 1` (EscrowBatchOutOfOrder, so a
    ///      replayed or skipped batch reverts); a non-zero receipts root (EscrowMissingReceiptsRoot); at least one
    ///      debit (EscrowEmptyBatch); no zero entry (EscrowZeroAmount); no seller at the zero address or the
    ///      escrow's own (EscrowInvalidAccount); each debit at most the account's balance at that point, so an account listed
    ///      twice is checked against what the first debit left (EscrowInsufficientBalance); total debits equal
    ///      total credits plus the fee (EscrowBatchUnbalanced). No tokens move, so no external call is made.
    /// @param batch The batch, see {Batch}.
    function settle(Batch calldata batch) external nonReentrant onlyRole(SETTLER_ROLE) {
        Settlement memory settlement = _settlement;
        uint256 batchNumber = uint256(settlement.lastBatchNumber) + 1;
        if (batch.number != batchNumber) revert EscrowBatchOutOfOrder(batchNumber, batch.number);
        if (batch.receiptsRoot == bytes32(0)) revert EscrowMissingReceiptsRoot(batch.number);
        uint256 debitCount = batch.debits.length;
        if (debitCount == 0) revert EscrowEmptyBatch(batch.number);

        // Fits: 2^64 batches would take longer than the chain will exist, even at one batch per block.
        _settlement.lastBatchNumber = uint64(batchNumber);
        receiptsRoots[batchNumber] = batch.receiptsRoot;

        uint256 totalDebits;
        for (uint256 i; i < debitCount; ++i) {
            Debit calldata debit = batch.debits[i];
            uint256 amount = debit.amount;
            if (amount == 0) revert EscrowZeroAmount();
            uint256 balance = balances[debit.account];
            if (amount > balance) revert EscrowInsufficientBalance(debit.account, balance, amount);
            unchecked {
                balance -= amount;
            }
            balances[debit.account] = balance;
            emit AccountDebited(debit.account, amount, balance);
            totalDebits += amount;
        }

        uint256 totalCredits;
        uint256 creditCount = batch.credits.length;
        for (uint256 i; i < creditCount; ++i) {
            Credit calldata credit = batch.credits[i];
            // Earnings credited to the escrow itself could never be claimed.
            if (credit.seller == address(0) || credit.seller == address(this)) revert EscrowInvalidAccount(credit.seller);
            if (credit.amount == 0) revert EscrowZeroAmount();
            earnings[credit.seller] += credit.amount;
            emit SellerCredited(credit.seller, credit.amount);
            totalCredits += credit.amount;
        }

        uint256 platformFee = batch.platformFee;
        if (totalDebits != totalCredits + platformFee) {
            revert EscrowBatchUnbalanced(totalDebits, totalCredits, platformFee);
        }
        address feeReceiver = settlement.treasury;
        if (platformFee != 0) earnings[feeReceiver] += platformFee;
        emit BatchSettled(batchNumber, batch.receiptsRoot, batch.callCount, totalDebits, platformFee, feeReceiver);
    }

    /// @notice Collects one x402 `exact` payment before its call runs: pulls `payment.value` of the payer's USDC into
    ///         the escrow with the payer's EIP-3009 authorization and holds it pending under `payment.callId`. The
    ///         gateway then either completes it ({completeX402}: the call succeeded; the seller is credited
    ///         `value - platformFee` and the treasury `platformFee`) or refunds it ({refundX402}: the call failed; the
    ///         payer gets the value back). If the gateway does neither, the payer takes it back with {reclaimX402}
    ///         from `X402_RECLAIM_DELAY` after collection on. Only SETTLER_ROLE. Not stopped by {pauseDeposits}.
    /// @dev The money moves before the work, so a call is never served on a payment that cannot be paid: a payer
    ///      who signs many authorizations over one balance, or moves its USDC while the skill runs, is refused here.
    ///      x402 clients sign `TransferWithAuthorization` with `to` = the payment's `payTo` (this escrow), not
    ///      `ReceiveWithAuthorization`, so the escrow cannot use `receiveWithAuthorization` with their signature;
    ///      it calls the token's `transferWithAuthorization` (the `bytes` overload, for EOA and ERC-1271
    ///      signatures) with `to = address(this)`. Because the signed `to` is the escrow, anyone who submits the
    ///      authorization to the token directly can only move the money into the escrow, never elsewhere; but it
    ///      then lands uncollected (owed to no one, with no function to take it out) and this call reverts on the
    ///      token's used nonce, holding nothing.
    ///      Checks, in order: EscrowZeroAmount for a zero value; EscrowInvalidAccount for a seller at the zero
    ///      address or the escrow's own; EscrowFeeExceedsAmount; EscrowX402PaymentExists when `callId` already has a
    ///      pending payment; then the token's own checks (signature of `from` over exactly these fields, validity
    ///      window, unused nonce, funds), whose reverts bubble up unchanged; finally EscrowTransferShortfall unless
    ///      the escrow's balance rose by exactly `value`, so a fee-on-transfer or otherwise unusual token can never
    ///      create a pending payment the escrow does not hold. Only a commitment to the pending payment is stored
    ///      (one slot): {completeX402}, {refundX402} and {reclaimX402} are given its fields, from {X402Collected}.
    /// @param payment The authorization's fields and the gateway's split, see {X402Payment}.
    /// @param signature The payer's signature of the authorization: 65 bytes from an EOA, or what the payer's
    ///        contract wallet accepts through ERC-1271.
    /// @return reclaimableAt When the payer may take the payment back if it is still pending.
    function collectX402(
        X402Payment calldata payment,
        bytes calldata signature
    ) external nonReentrant onlyRole(SETTLER_ROLE) returns (uint256 reclaimableAt) {
        uint256 value = payment.value;
        if (value == 0) revert EscrowZeroAmount();
        address seller = payment.seller;
        // Earnings credited to the escrow itself could never be claimed.
        if (seller == address(0) || seller == address(this)) revert EscrowInvalidAccount(seller);
        uint256 platformFee = payment.platformFee;
        if (platformFee > value) revert EscrowFeeExceedsAmount(platformFee, value);
        bytes32 callId = payment.callId;
        if (x402Pending[callId] != bytes32(0)) revert EscrowX402PaymentExists(callId);

        _pullAuthorized(payment, signature);

        reclaimableAt = block.timestamp + X402_RECLAIM_DELAY;
        x402Pending[callId] = hashX402Pending(
            X402Pending({payer: payment.from, seller: seller, value: value, platformFee: platformFee, reclaimableAt: reclaimableAt})
        );
        _x402PendingTotalPlusOne += value;
        emit X402Collected(callId, payment.from, seller, value, platformFee, reclaimableAt);
    }

    /// @notice Completes the pending x402 payment `callId`: its call succeeded. Credits the seller
    ///         `value - platformFee` and the treasury current now `platformFee`, as earnings claimable through
    ///         {claim} like batch revenue. Only SETTLER_ROLE; possible for as long as the payment is pending (also
    ///         after `reclaimableAt`, until the payer reclaims it).
    /// @dev Reverts with EscrowX402PaymentNotPending unless `pending` is exactly what {collectX402} committed to
    ///      under `callId` and not yet completed, refunded or reclaimed. Moves no tokens.
    /// @param callId The gateway's call id the payment was collected for.
    /// @param pending The pending payment's fields, as {X402Collected} emitted them.
    function completeX402(bytes32 callId, X402Pending calldata pending) external nonReentrant onlyRole(SETTLER_ROLE) {
        _takePending(callId, pending);
        uint256 platformFee = pending.platformFee;
        uint256 sellerShare;
        unchecked {
            sellerShare = pending.value - platformFee; // platformFee <= value, checked at collection
        }
        if (sellerShare != 0) earnings[pending.seller] += sellerShare;
        address feeReceiver = _settlement.treasury;
        if (platformFee != 0) earnings[feeReceiver] += platformFee;
        emit X402Settled(callId, pending.payer, pending.seller, pending.value, platformFee, feeReceiver);
    }

    /// @notice Refunds the pending x402 payment `callId` to its payer: its call failed. Only SETTLER_ROLE.
    /// @dev Reverts with EscrowX402PaymentNotPending as {completeX402}. The payment is cleared before the transfer.
    /// @param callId The gateway's call id the payment was collected for.
    /// @param pending The pending payment's fields, as {X402Collected} emitted them.
    function refundX402(bytes32 callId, X402Pending calldata pending) external nonReentrant onlyRole(SETTLER_ROLE) {
        _takePending(callId, pending);
        emit X402Refunded(callId, pending.payer, pending.value, false);
        usdc.safeTransfer(pending.payer, pending.value);
    }

    /// @notice Gives a payment the gateway neither completed nor refunded back to its payer, from `reclaimableAt` on.
    ///         Anyone may submit it (a relayer pays the gas); the tokens always go to the payer.
    /// @dev Reverts with EscrowX402PaymentNotPending as {completeX402}, EscrowX402NotReclaimable before
    ///      `reclaimableAt`. The payment is cleared before the transfer.
    /// @param callId The gateway's call id the payment was collected for.
    /// @param pending The pending payment's fields, as {X402Collected} emitted them.
    function reclaimX402(bytes32 callId, X402Pending calldata pending) external nonReentrant {
        _takePending(callId, pending);
        if (block.timestamp < pending.reclaimableAt) {
            revert EscrowX402NotReclaimable(callId, pending.reclaimableAt, block.timestamp);
        }
        emit X402Refunded(callId, pending.payer, pending.value, true);
        usdc.safeTransfer(pending.payer, pending.value);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Claims (never paused)
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Sends all of the caller's settled earnings to the caller.
    /// @dev Reverts with EscrowNothingToClaim when there is nothing. Never paused.
    /// @return amount What was paid, in base units.
    function claim() external nonReentrant returns (uint256 amount) {
        return _claim(msg.sender, msg.sender);
    }

    /// @notice Sends all of the caller's settled earnings to `recipient`.
    /// @dev Reverts with EscrowInvalidAccount for the zero address, EscrowNothingToClaim when there is nothing.
    /// @param recipient Receiver of the tokens.
    /// @return amount What was paid, in base units.
    function claimTo(address recipient) external nonReentrant returns (uint256 amount) {
        if (recipient == address(0)) revert EscrowInvalidAccount(recipient);
        return _claim(msg.sender, recipient);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Exits (never paused)
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Cooperative instant withdrawal: pays `voucher.amount` from `voucher.account`'s balance to that
    ///         account, authorised by an EIP-712 signature of a VOUCHER_SIGNER_ROLE holder. Anyone may submit it;
    ///         the tokens always go to `voucher.account`.
    /// @dev The gateway signs only what its ledger shows as unspent, so the off-chain spend not yet settled stays
    ///      covered. Checks, in order: EscrowVoucherExpired, EscrowVoucherNonceUsed, EscrowInvalidVoucherSigner,
    ///      EscrowZeroAmount, EscrowInsufficientBalance. The nonce is consumed only by a successful withdrawal.
    /// @param voucher The signed voucher.
    /// @param signature 65-byte ECDSA signature over {hashVoucher}.
    function withdrawWithVoucher(Voucher calldata voucher, bytes calldata signature) external nonReentrant {
        address account = voucher.account;
        if (block.timestamp > voucher.deadline) revert EscrowVoucherExpired(voucher.deadline, block.timestamp);
        if (voucherNonceUsed[account][voucher.nonce]) revert EscrowVoucherNonceUsed(account, voucher.nonce);
        (address signer, ECDSA.RecoverError recoverError, ) = ECDSA.tryRecoverCalldata(hashVoucher(voucher), signature);
        if (recoverError != ECDSA.RecoverError.NoError || !hasRole(VOUCHER_SIGNER_ROLE, signer)) {
            revert EscrowInvalidVoucherSigner(signer);
        }
        uint256 amount = voucher.amount;
        if (amount == 0) revert EscrowZeroAmount();
        uint256 balance = balances[account];
        if (amount > balance) revert EscrowInsufficientBalance(account, balance, amount);

        voucherNonceUsed[account][voucher.nonce] = true;
        unchecked {
            balance -= amount;
        }
        balances[account] = balance;
        emit VoucherRedeemed(account, voucher.nonce, amount, balance);

        usdc.safeTransfer(account, amount);
    }

    /// @notice Unilateral exit, step 1: asks to withdraw `amount` of the caller's balance after `exitDelay`.
    ///         Needs no cooperation from the gateway. A new request replaces a pending one and restarts the delay.
    /// @dev The amount stays in the balance during the delay so that calls already made can still be settled;
    ///      {completeExit} pays what remains of it. Reverts with EscrowZeroAmount, EscrowInsufficientBalance.
    /// @param amount Base units, at most the current balance.
    function requestExit(uint256 amount) external nonReentrant {
        if (amount == 0) revert EscrowZeroAmount();
        uint256 balance = balances[msg.sender];
        if (amount > balance) revert EscrowInsufficientBalance(msg.sender, balance, amount);
        uint256 readyAt = block.timestamp + exitDelay;
        _exits[msg.sender] = Exit({amount: amount, readyAt: readyAt});
        emit ExitRequested(msg.sender, amount, readyAt);
    }

    /// @notice Withdraws the caller's pending exit request without paying anything.
    /// @dev Reverts with EscrowNoPendingExit.
    function cancelExit() external nonReentrant {
        Exit memory pending = _exits[msg.sender];
        if (pending.readyAt == 0) revert EscrowNoPendingExit(msg.sender);
        delete _exits[msg.sender];
        emit ExitCancelled(msg.sender, pending.amount);
    }

    /// @notice Unilateral exit, step 2: once the delay has passed, pays the caller the requested amount, or the
    ///         whole remaining balance if batches settled during the delay left less than that.
    /// @dev Reverts with EscrowNoPendingExit, EscrowExitNotReady. Clears the request even when it pays zero.
    /// @return paid What was paid, in base units.
    function completeExit() external nonReentrant returns (uint256 paid) {
        Exit memory pending = _exits[msg.sender];
        if (pending.readyAt == 0) revert EscrowNoPendingExit(msg.sender);
        if (block.timestamp < pending.readyAt) {
            revert EscrowExitNotReady(msg.sender, pending.readyAt, block.timestamp);
        }
        uint256 balance = balances[msg.sender];
        paid = pending.amount < balance ? pending.amount : balance;

        delete _exits[msg.sender];
        unchecked {
            balance -= paid;
        }
        balances[msg.sender] = balance;
        emit ExitCompleted(msg.sender, pending.amount, paid, balance);

        if (paid != 0) usdc.safeTransfer(msg.sender, paid);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Administration (DEFAULT_ADMIN_ROLE)
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Sets the minimum deposit. Only the admin.
    /// @dev Reverts with EscrowZeroAmount for zero.
    /// @param amount New minimum in base units.
    function setMinDeposit(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (amount == 0) revert EscrowZeroAmount();
        uint256 previous = minDeposit;
        minDeposit = amount;
        emit MinDepositChanged(previous, amount);
    }

    /// @notice Sets the exit delay for future exit requests. Only the admin.
    /// @dev Reverts with EscrowExitDelayOutOfBounds outside [MIN_EXIT_DELAY, MAX_EXIT_DELAY]. Pending requests
    ///      keep the `readyAt` they were given, so a change can never lengthen a wait already started.
    /// @param delay New delay in seconds.
    function setExitDelay(uint256 delay) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (delay < MIN_EXIT_DELAY || delay > MAX_EXIT_DELAY) {
            revert EscrowExitDelayOutOfBounds(delay, MIN_EXIT_DELAY, MAX_EXIT_DELAY);
        }
        uint256 previous = exitDelay;
        exitDelay = delay;
        emit ExitDelayChanged(previous, delay);
    }

    /// @notice Sets the receiver of future platform fees. Only the admin.
    /// @dev Reverts with EscrowInvalidAccount for the zero address. Fees already credited stay with the previous
    ///      treasury, which can still claim them.
    /// @param newTreasury The new fee receiver.
    function setTreasury(address newTreasury) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (newTreasury == address(0)) revert EscrowInvalidAccount(newTreasury);
        address previous = _settlement.treasury;
        _settlement.treasury = newTreasury;
        emit TreasuryChanged(previous, newTreasury);
    }

    /// @notice Stops new deposits. Settlement (batches and x402 payments), claims, vouchers and exits keep working.
    ///         Only the admin.
    /// @dev Emits Paused; reverts with EnforcedPause when already paused.
    function pauseDeposits() external onlyRole(DEFAULT_ADMIN_ROLE) {
        _pause();
    }

    /// @notice Accepts deposits again. Only the admin.
    /// @dev Emits Unpaused; reverts with ExpectedPause when not paused.
    function unpauseDeposits() external onlyRole(DEFAULT_ADMIN_ROLE) {
        _unpause();
    }

    // ---------------------------------------------------------------------------------------------------------
    // Views
    // ---------------------------------------------------------------------------------------------------------

    /// @notice Receiver of platform fees. Fees already credited stay claimable by the treasury they went to.
    function treasury() external view returns (address) {
        return _settlement.treasury;
    }

    /// @notice Number of the last settled batch (0 before the first).
    function lastBatchNumber() external view returns (uint256) {
        return _settlement.lastBatchNumber;
    }

    /// @notice The pending exit of `account`: requested amount and the time it becomes payable (0, 0 if none).
    function pendingExit(address account) external view returns (uint256 amount, uint256 readyAt) {
        Exit memory pending = _exits[account];
        return (pending.amount, pending.readyAt);
    }

    /// @notice The sum of every pending x402 payment's value: USDC the escrow holds for no balance and no earnings yet.
    function x402PendingTotal() external view returns (uint256) {
        return _x402PendingTotalPlusOne - 1;
    }

    /// @notice The commitment {x402Pending} stores for a pending x402 payment.
    function hashX402Pending(X402Pending memory pending) public pure returns (bytes32) {
        return keccak256(abi.encode(pending.payer, pending.seller, pending.value, pending.platformFee, pending.reclaimableAt));
    }

    /// @notice The EIP-712 digest a voucher signer signs for `voucher`.
    function hashVoucher(Voucher calldata voucher) public view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(abi.encode(VOUCHER_TYPEHASH, voucher.account, voucher.amount, voucher.nonce, voucher.deadline))
        );
    }

    /// @notice The Merkle leaf of one call receipt: the double keccak of its ABI encoding, as OpenZeppelin's
    ///         StandardMerkleTree builds leaves for types (bytes32, address, address, uint256, uint256).
    /// @param callId The gateway's identifier of the call.
    /// @param account The account that paid.
    /// @param seller The seller credited.
    /// @param amount What the account paid, in base units.
    /// @param platformFee The platform's part of `amount`.
    function receiptLeaf(
        bytes32 callId,
        address account,
        address seller,
        uint256 amount,
        uint256 platformFee
    ) public pure returns (bytes32) {
        return keccak256(bytes.concat(keccak256(abi.encode(callId, account, seller, amount, platformFee))));
    }

    /// @notice Whether the call receipt described by the arguments is included in batch `batchNumber`, proven by
    ///         `proof` against the batch's recorded receipts root (sorted-pair hashing). False for unknown batches.
    function verifyReceipt(
        uint256 batchNumber,
        bytes32 callId,
        address account,
        address seller,
        uint256 amount,
        uint256 platformFee,
        bytes32[] calldata proof
    ) external view returns (bool) {
        bytes32 root = receiptsRoots[batchNumber];
        if (root == bytes32(0)) return false;
        return MerkleProof.verifyCalldata(proof, root, receiptLeaf(callId, account, seller, amount, platformFee));
    }

    // ---------------------------------------------------------------------------------------------------------
    // Internals
    // ---------------------------------------------------------------------------------------------------------

    function _checkDeposit(address account, uint256 amount) private view {
        if (paused()) revert EscrowDepositsPaused();
        if (account == address(0)) revert EscrowInvalidAccount(account);
        uint256 minimum = minDeposit;
        if (amount < minimum) revert EscrowDepositBelowMinimum(amount, minimum);
    }

    /// @dev Credits first, then pulls the tokens (checks-effects-interactions); a failed pull reverts the credit.
    function _deposit(address from, address account, uint256 amount) private {
        _checkDeposit(account, amount);
        uint256 balance = balances[account] + amount;
        balances[account] = balance;
        emit Deposited(account, from, amount, balance);
        usdc.safeTransferFrom(from, address(this), amount);
    }

    /// @dev Pulls `payment.value` from the payer with its EIP-3009 authorization (to this escrow), and reverts with
    ///      EscrowTransferShortfall unless exactly that arrived.
    function _pullAuthorized(X402Payment calldata payment, bytes calldata signature) private {
        uint256 value = payment.value;
        uint256 balanceBefore = usdc.balanceOf(address(this));
        IERC3009Bytes(address(usdc)).transferWithAuthorization(
            payment.from,
            address(this),
            value,
            payment.validAfter,
            payment.validBefore,
            payment.nonce,
            signature
        );
        uint256 balanceAfter = usdc.balanceOf(address(this));
        uint256 received = balanceAfter > balanceBefore ? balanceAfter - balanceBefore : 0;
        if (received != value) revert EscrowTransferShortfall(value, received);
    }

    /// @dev Clears the pending x402 payment `callId` if `pending` is what was committed to, else reverts.
    function _takePending(bytes32 callId, X402Pending calldata pending) private {
        bytes32 commitment = x402Pending[callId];
        if (commitment == bytes32(0) || commitment != hashX402Pending(pending)) revert EscrowX402PaymentNotPending(callId);
        delete x402Pending[callId];
        _x402PendingTotalPlusOne -= pending.value;
    }

    function _claim(address seller, address recipient) private returns (uint256 amount) {
        amount = earnings[seller];
        if (amount == 0) revert EscrowNothingToClaim(seller);
        earnings[seller] = 0;
        emit Claimed(seller, recipient, amount);
        usdc.safeTransfer(recipient, amount);
    }
}

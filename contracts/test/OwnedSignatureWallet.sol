// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

/// @title OwnedSignatureWallet
/// @notice Test double of a smart account for signature checks (ERC-1271): a signature is valid
///         when it is its owner's ECDSA signature of the hash. Real smart accounts wrap the hash
///         in their own domain first; the verifier does not care how, only that they answer.
contract OwnedSignatureWallet {
    bytes4 internal constant ERC1271_MAGIC_VALUE = 0x1626ba7e;
    bytes4 internal constant ERC1271_INVALID = 0xffffffff;

    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    /// @notice ERC-1271: the magic value when `signature` is the owner's signature of `hash`.
    /// @param hash The signed digest.
    /// @param signature 65 bytes: r, s, v.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return ERC1271_INVALID;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        return ecrecover(hash, v, r, s) == owner ? ERC1271_MAGIC_VALUE : ERC1271_INVALID;
    }
}

/// @title OwnedSignatureWalletFactory
/// @notice Deploys OwnedSignatureWallets at CREATE2 addresses known before deployment, the
///         counterfactual accounts whose signatures ERC-6492 wraps with their deployment call.
contract OwnedSignatureWalletFactory {
    /// @notice Deploys the wallet of `owner` for `salt` at its CREATE2 address.
    /// @param owner The wallet's signer.
    /// @param salt The CREATE2 salt.
    /// @return wallet The deployed wallet.
    function deploy(address owner, bytes32 salt) external returns (address wallet) {
        wallet = address(new OwnedSignatureWallet{salt: salt}(owner));
    }
}

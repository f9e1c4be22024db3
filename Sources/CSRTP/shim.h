#include <srtp2/srtp.h>
// srtp_crypto_policy_set_rtp_default is a macro in some releases; one function Swift can call.
static inline void csrtp_policy_aes128_sha1_80(srtp_policy_t *p) {
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&p->rtp);
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&p->rtcp);
}

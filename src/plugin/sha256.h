/* sha256.h -- SHA-256 (FIPS 180-4), for the JIT cache's keys and its
   files' checksums.  */

#ifndef GM_SHA256_H
#define GM_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct gm_sha256
{
  uint32_t state[8];
  uint64_t bytes;
  unsigned char block[64];
  size_t used;
} gm_sha256;

void gm_sha256_init (gm_sha256 *ctx);
void gm_sha256_update (gm_sha256 *ctx, const void *data, size_t size);
void gm_sha256_final (gm_sha256 *ctx, unsigned char digest[32]);

#endif /* GM_SHA256_H */

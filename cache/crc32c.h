/* crc32c: the Castagnoli CRC (iSCSI, ext4, RFC 3720) that guards cached blocks.
 *
 * Standard parameters: reflected polynomial 0x82F63B78, initial value and final
 * xor 0xFFFFFFFF, so cfs_crc32c(0, "123456789", 9) == 0xE3069283.  The crc
 * argument is the result of the previous call (0 to start), so a buffer may be
 * checksummed in pieces.  Uses the SSE4.2 crc32 instruction when the CPU has it
 * (checked once at run time), else a slicing-by-8 table.  Pure code: no
 * failure, thread-safe, no allocation. */
#ifndef CFS_CRC32C_H
#define CFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t cfs_crc32c(uint32_t crc, const void *p, size_t n);

/* The two implementations, for tests and benchmarks.  cfs_crc32c_hw falls back
 * to the table version when cfs_crc32c_hw_available() is 0. */
uint32_t cfs_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t cfs_crc32c_hw(uint32_t crc, const void *p, size_t n);
int cfs_crc32c_hw_available(void);

#endif

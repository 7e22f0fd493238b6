/*
 * A stand-in for miniaudio.h, used only to build Ollama from the Go module proxy
 * (scripts/e2e-tools.sh ollama).
 *
 * Why: the github.com/ollama/ollama module zip drops llama.cpp's vendor/ directory,
 * and llama/llama.cpp/tools/mtmd/mtmd-helper.cpp includes "miniaudio/miniaudio.h"
 * (audio input of multimodal models). Debian ships nlohmann/json.hpp and
 * stb/stb_image.h (nlohmann-json3-dev, libstb-dev) but not miniaudio, so this file
 * declares just the decoder calls mtmd-helper.cpp makes, each failing: audio input is
 * disabled in this build, and the tests never send audio. Nothing else is affected.
 * mtmd-helper.cpp defines MA_API as static before including this header.
 */
#ifndef VLLM_PROBER_MINIAUDIO_STUB_H
#define VLLM_PROBER_MINIAUDIO_STUB_H

#include <stddef.h>

#ifndef MA_API
#define MA_API static
#endif

typedef int ma_result;
typedef unsigned long long ma_uint64;
typedef unsigned int ma_uint32;
typedef enum { ma_format_unknown = 0, ma_format_f32 = 5 } ma_format;

#define MA_SUCCESS 0
#define MA_NOT_IMPLEMENTED (-29)

typedef struct { ma_format format; ma_uint32 channels; ma_uint32 sampleRate; } ma_decoder_config;
typedef struct { int unused; } ma_decoder;

MA_API ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sampleRate) {
	ma_decoder_config c;
	c.format = format;
	c.channels = channels;
	c.sampleRate = sampleRate;
	return c;
}
MA_API ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder) {
	(void)data; (void)size; (void)config; (void)decoder;
	return MA_NOT_IMPLEMENTED;
}
MA_API ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *length) {
	(void)decoder;
	*length = 0;
	return MA_NOT_IMPLEMENTED;
}
MA_API ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *frames, ma_uint64 count, ma_uint64 *read) {
	(void)decoder; (void)frames; (void)count;
	*read = 0;
	return MA_NOT_IMPLEMENTED;
}
MA_API ma_result ma_decoder_uninit(ma_decoder *decoder) {
	(void)decoder;
	return MA_SUCCESS;
}

#endif

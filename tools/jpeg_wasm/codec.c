/*
 * codec.c: the glue between libjpeg-turbo (2.1.5, 8-bit, no SIMD) and the host
 * (declaw_wasm/_media/jpeg.py), compiled with it into declaw_wasm/_media/jpeg.wasm.
 *
 * The host runs every call in a fresh instance of the module, so this file keeps
 * its state in statics and never cleans up after an error: libjpeg's error_exit
 * formats the message into `error_buf` and traps (`unreachable`); the host reads
 * the message through error_message() and drops the instance.
 *
 * Exports (all integers are i32; pointers are offsets into the module's memory):
 *   alloc(n) -> ptr                  malloc(n); 0 if memory is short
 *   warning_message() -> ptr         the first warning's text ("" if none)
 *   error_message() -> ptr           NUL-terminated text of the last fatal error ("" if none)
 *   header(in, len) -> ptr           parses up to the first SOS; ptr to struct jpeg_header
 *                                    (width, height, components, J_COLOR_SPACE, progressive,
 *                                    arithmetic, multiscan)
 *   decode(in, len, out_mode, scale_denom) -> ptr
 *                                    out_mode 1 gray, 2 YCbCr, 3 RGB, 4 CMYK (as stored:
 *                                    no Adobe inversion); scale_denom 1, 2, 4 or 8;
 *                                    ptr to struct decode_result
 *   encode(pixels, width, height, components, quality, progressive, optimize,
 *          subsampling, density_unit, x_density, y_density, arithmetic) -> ptr
 *                                    components 1 (gray), 3 (RGB -> YCbCr), 4 (CMYK, with
 *                                    an Adobe marker); subsampling -1 libjpeg's default,
 *                                    0 4:4:4, 1 4:2:2, 2 4:2:0; arithmetic 1: arithmetic
 *                                    coding instead of Huffman; ptr to struct encode_result
 * Warnings (corrupt data, premature end of file) never stop a decode: they are counted,
 * the first one's text is kept (warning_message()), and a premature end sets `truncated`.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeglib.h"
#include "jerror.h"

#define EXPORT(name) __attribute__((export_name(#name), visibility("default")))

static char error_buf[JMSG_LENGTH_MAX + 64];
static char warning_buf[JMSG_LENGTH_MAX + 64];
static int32_t warnings;
static int32_t truncated;
/* full-size samples (width x height x components) beyond which a truncated file's missing rows
 * are filled grey instead of decoded (64 MP of RGB: a truncated phone photo still decodes whole) */
#define TRUNCATED_WALK_LIMIT ((uint64_t)192 << 20)

struct jpeg_header {
  uint32_t width, height, components, color_space, progressive, arithmetic, multiscan;
};

struct decode_result {
  uint32_t width, height, components, pixels, warnings, truncated;
};

struct encode_result {
  uint32_t data, size;
};

static struct jpeg_header header_out;
static struct decode_result decode_out;
static struct encode_result encode_out;

static void fatal(j_common_ptr cinfo) {
  char text[JMSG_LENGTH_MAX];
  text[0] = 0;
  (*cinfo->err->format_message)(cinfo, text);
  if (!text[0]) strcpy(text, "libjpeg error");
  strncpy(error_buf, text, sizeof(error_buf) - 1);
  error_buf[sizeof(error_buf) - 1] = 0;
  __builtin_trap();
}

static void emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  /* trace messages: ignored */
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) truncated = 1;
  if (warnings == 0) {
    warning_buf[0] = 0;
    (*cinfo->err->format_message)(cinfo, warning_buf);
  }
  warnings++;
  cinfo->err->num_warnings++;
}

static void output_message(j_common_ptr cinfo) { (void)cinfo; }

static void setup_errors(struct jpeg_error_mgr *err) {
  jpeg_std_error(err);
  err->error_exit = fatal;
  err->emit_message = emit_message;
  err->output_message = output_message;
}

static void fail(const char *text) {
  strncpy(error_buf, text, sizeof(error_buf) - 1);
  error_buf[sizeof(error_buf) - 1] = 0;
  __builtin_trap();
}

EXPORT(alloc) void *alloc(uint32_t n) { return malloc(n ? n : 1); }

EXPORT(error_message) const char *error_message(void) { return error_buf; }

EXPORT(warning_message) const char *warning_message(void) { return warning_buf; }

static void start_read(struct jpeg_decompress_struct *cinfo, struct jpeg_error_mgr *err,
                       const unsigned char *in, uint32_t len) {
  setup_errors(err);
  cinfo->err = err;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, in, len);
  (void)jpeg_read_header(cinfo, TRUE);
}

EXPORT(header) struct jpeg_header *header(const unsigned char *in, uint32_t len) {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_error_mgr err;
  start_read(&cinfo, &err, in, len);
  header_out.width = cinfo.image_width;
  header_out.height = cinfo.image_height;
  header_out.components = cinfo.num_components;
  header_out.color_space = cinfo.jpeg_color_space;
  header_out.progressive = cinfo.progressive_mode ? 1 : 0;
  header_out.arithmetic = cinfo.arith_code ? 1 : 0;
  /* libjpeg then keeps the whole image's coefficients (jdcoefct.c's multi-scan buffer) */
  header_out.multiscan =
    (cinfo.progressive_mode || cinfo.comps_in_scan < cinfo.num_components) ? 1 : 0;
  jpeg_destroy_decompress(&cinfo);
  return &header_out;
}

EXPORT(decode) struct decode_result *decode(const unsigned char *in, uint32_t len,
                                            int32_t out_mode, int32_t scale_denom) {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_error_mgr err;
  J_COLOR_SPACE space;
  size_t stride, size;
  unsigned char *pixels;

  switch (out_mode) {
  case 1: space = JCS_GRAYSCALE; break;
  case 2: space = JCS_YCbCr; break;
  case 3: space = JCS_RGB; break;
  case 4: space = JCS_CMYK; break;
  default: fail("bad output mode"); return NULL;
  }
  if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8)
    fail("bad scale");

  start_read(&cinfo, &err, in, len);
  cinfo.out_color_space = space;
  cinfo.scale_num = 1;
  cinfo.scale_denom = (unsigned int)scale_denom;
  jpeg_start_decompress(&cinfo);

  stride = (size_t)cinfo.output_width * (size_t)cinfo.output_components;
  size = stride * (size_t)cinfo.output_height;
  pixels = (unsigned char *)malloc(size ? size : 1);
  if (!pixels) fail("out of memory for the decoded pixels");
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[4];
    int i, n = 0;
    for (i = 0; i < 4 && cinfo.output_scanline + i < cinfo.output_height; i++)
      rows[i] = pixels + (size_t)(cinfo.output_scanline + i) * stride;
    n = i;
    (void)jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)n);
    if ((truncated || (cinfo.unread_marker && (cinfo.unread_marker < 0xD0 || cinfo.unread_marker > 0xD7))) &&
        (uint64_t)cinfo.image_width * cinfo.image_height * (uint64_t)cinfo.num_components > TRUNCATED_WALK_LIMIT) {
      /* The scan's data has ended (the file did, or a marker other than a restart came): libjpeg
       * would go on decoding zeros for every block the header claims (a 209-byte file claiming
       * 65500x65500 pixels: 3 to 20 s of work, arithmetic coding the dearest). Past
       * TRUNCATED_WALK_LIMIT samples the rest is grey at once, as libjpeg's zeros nearly are;
       * smaller images go on as libjpeg does (what Pillow shows). */
      memset(pixels + (size_t)cinfo.output_scanline * stride, 128,
             (size_t)(cinfo.output_height - cinfo.output_scanline) * stride);
      jpeg_abort_decompress(&cinfo);
      goto done;
    }
  }
  jpeg_finish_decompress(&cinfo);
done:

  decode_out.width = cinfo.output_width;
  decode_out.height = cinfo.output_height;
  decode_out.components = cinfo.output_components;
  decode_out.pixels = (uint32_t)(uintptr_t)pixels;
  decode_out.warnings = (uint32_t)warnings;
  decode_out.truncated = (uint32_t)truncated;
  jpeg_destroy_decompress(&cinfo);
  return &decode_out;
}

EXPORT(encode) struct encode_result *encode(const unsigned char *pixels, int32_t width, int32_t height,
                                            int32_t components, int32_t quality, int32_t progressive,
                                            int32_t optimize, int32_t subsampling, int32_t density_unit,
                                            int32_t x_density, int32_t y_density, int32_t arithmetic) {
  struct jpeg_compress_struct cinfo;
  struct jpeg_error_mgr err;
  unsigned char *out = NULL;
  unsigned long out_size = 0;
  size_t stride;

  if (width < 1 || height < 1 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION)
    fail("bad dimensions");
  if (quality < 1 || quality > 100) fail("bad quality");
  if (subsampling < -1 || subsampling > 2) fail("bad subsampling");
  if (density_unit < 0 || density_unit > 2 || x_density < 0 || x_density > 65535 ||
      y_density < 0 || y_density > 65535)
    fail("bad density");

  setup_errors(&err);
  cinfo.err = &err;
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = (JDIMENSION)width;
  cinfo.image_height = (JDIMENSION)height;
  cinfo.input_components = components;
  switch (components) {
  case 1: cinfo.in_color_space = JCS_GRAYSCALE; break;
  case 3: cinfo.in_color_space = JCS_RGB; break;
  case 4: cinfo.in_color_space = JCS_CMYK; break;
  default: fail("bad components"); return NULL;
  }
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (subsampling >= 0 && components == 3) {
    /* Pillow's factors for the first (luma) component; the others stay 1x1 */
    static const int h[3] = {1, 2, 2}, v[3] = {1, 1, 2};
    cinfo.comp_info[0].h_samp_factor = h[subsampling];
    cinfo.comp_info[0].v_samp_factor = v[subsampling];
  }
  if (density_unit > 0) {
    cinfo.write_JFIF_header = TRUE;
    cinfo.density_unit = (UINT8)density_unit;
    cinfo.X_density = (UINT16)x_density;
    cinfo.Y_density = (UINT16)y_density;
  }
  if (optimize) cinfo.optimize_coding = TRUE;
  if (arithmetic) cinfo.arith_code = TRUE;
  if (progressive) jpeg_simple_progression(&cinfo);

  jpeg_start_compress(&cinfo, TRUE);
  stride = (size_t)width * (size_t)components;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW rows[16];
    int i;
    for (i = 0; i < 16 && cinfo.next_scanline + i < cinfo.image_height; i++)
      rows[i] = (JSAMPROW)(pixels + (size_t)(cinfo.next_scanline + i) * stride);
    (void)jpeg_write_scanlines(&cinfo, rows, (JDIMENSION)i);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);

  encode_out.data = (uint32_t)(uintptr_t)out;
  encode_out.size = (uint32_t)out_size;
  return &encode_out;
}

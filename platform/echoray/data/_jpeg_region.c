/* Decode one rectangle of a JPEG with libjpeg-turbo's partial decode (jpeg_crop_scanline,
 * jpeg_skip_scanlines), at a DCT scale of num/8.
 *
 * decode_region(data, num, x, width, y0, y1) -> (bytearray, xoffset, out_width)
 *   data: the JPEG's bytes; num: 1..8 (the image is decoded at num/8 of its size, the
 *   factors simplejpeg chooses from); x, width: the columns wanted, in scaled pixels;
 *   y0, y1: the rows wanted, [y0, y1), in scaled pixels.
 *   Returns rows y0..y1-1 of RGB pixels as a bytearray of (y1 - y0) * out_width * 3, holding
 *   columns xoffset..xoffset+out_width-1: libjpeg widens the columns to whole iMCUs
 *   (xoffset <= x, xoffset + out_width >= x + width). Rows above y0 are entropy-decoded
 *   and dropped (no IDCT); rows from y1 on are not read at all.
 *   A decoded column at the region's left or right edge that is not the image's edge
 *   differs from a full decode (fancy upsampling sees the region's edge as the image's):
 *   callers ask for a column more on each side than they use (data/jpeg_region.py).
 *   Raises ValueError with libjpeg's message for data libjpeg cannot decode to RGB.
 * The GIL is released while libjpeg works.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>

struct region_error {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

static void on_error(j_common_ptr cinfo) {
    struct region_error *err = (struct region_error *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void quiet(j_common_ptr cinfo) { (void)cinfo; } /* warnings: no stderr noise */

static PyObject *decode_region(PyObject *self, PyObject *args) {
    Py_buffer data;
    int num, x, width, y0, y1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*iiiii", &data, &num, &x, &width, &y0, &y1))
        return NULL;
    if (num < 1 || num > 8 || x < 0 || width < 1 || y0 < 0 || y1 <= y0) {
        PyBuffer_Release(&data);
        return PyErr_Format(PyExc_ValueError, "decode_region: bad region num=%d x=%d width=%d rows [%d, %d)",
                            num, x, width, y0, y1);
    }
    struct jpeg_decompress_struct cinfo;
    struct region_error err;
    PyObject *volatile out = NULL;
    volatile int gil_released = 0;
    PyThreadState *volatile state = NULL;
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.output_message = quiet;
    err.message[0] = '\0';
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        if (gil_released) PyEval_RestoreThread(state);
        Py_XDECREF(out);
        PyBuffer_Release(&data);
        return PyErr_Format(PyExc_ValueError, "libjpeg: %s", err.message);
    }
    jpeg_mem_src(&cinfo, (const unsigned char *)data.buf, (unsigned long)data.len);
    jpeg_read_header(&cinfo, TRUE);
    cinfo.out_color_space = JCS_RGB;
    cinfo.scale_num = (unsigned int)num;
    cinfo.scale_denom = 8;
    cinfo.dct_method = JDCT_ISLOW;     /* simplejpeg's default (no fastdct) */
    cinfo.do_fancy_upsampling = TRUE;  /* simplejpeg's default (no fastupsample) */
    jpeg_start_decompress(&cinfo);
    if ((JDIMENSION)y1 > cinfo.output_height || (JDIMENSION)(x + width) > cinfo.output_width) {
        snprintf(err.message, sizeof err.message, "region x=%d width=%d rows [%d, %d) outside the %ux%u image",
                 x, width, y0, y1, cinfo.output_width, cinfo.output_height);
        longjmp(err.jump, 1);
    }
    JDIMENSION xoffset = (JDIMENSION)x, out_width = (JDIMENSION)width;
    jpeg_crop_scanline(&cinfo, &xoffset, &out_width);
    size_t row_bytes = (size_t)out_width * 3;
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(row_bytes * (size_t)(y1 - y0)));
    if (out == NULL) {
        jpeg_destroy_decompress(&cinfo);
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *pixels = (unsigned char *)PyByteArray_AS_STRING(out);
    state = PyEval_SaveThread();
    gil_released = 1;
    if (y0 > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)y0);
    while (cinfo.output_scanline < (JDIMENSION)y1) {
        JSAMPROW row = pixels + (size_t)(cinfo.output_scanline - (JDIMENSION)y0) * row_bytes;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_abort_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    PyEval_RestoreThread(state);
    PyBuffer_Release(&data);
    return Py_BuildValue("(NII)", (PyObject *)out, (unsigned int)xoffset, (unsigned int)out_width);
}

static PyMethodDef methods[] = {
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(data, num, x, width, y0, y1) -> (bytearray, xoffset, out_width): rows [y0, y1) "
     "and columns from x (widened to whole iMCUs) of a JPEG decoded at num/8, RGB."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpeg_region", NULL, -1, methods};

PyMODINIT_FUNC PyInit__jpeg_region(void) { return PyModule_Create(&module); }

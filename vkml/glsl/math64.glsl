// math64.glsl: float64 overloads of the functions of math.glsl and generated.glsl, for the kernels that
// compute in double (GLSL has no double exp, log, sin, cos, tanh, pow or erf at all). Each function:
// exact special cases first, then argument reduction, then the polynomial or rational approximation of
// fdlibm (Sun Microsystems' freely distributable libm: e_exp.c, e_log.c, k_sin.c, k_cos.c, s_tanh.c,
// s_erf.c), whose coefficients are quoted below. Measured on the device against libm's (numpy, math)
// by tests/test_parity_elementwise.py::test_math64_accuracy_in_ulps: at most 4 ulp on lavapipe (results
// in the normal range). Included only by kernels that compute in double, so the others need no
// Float64 capability.
//
// fdlibm's notice, which its coefficients carry:
//   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
//   Developed at SunPro, a Sun Microsystems, Inc. business.
//   Permission to use, copy, modify, and distribute this software is freely granted, provided that
//   this notice is preserved.
#ifndef VKML_MATH64_GLSL
#define VKML_MATH64_GLSL

#define D_NAN packDouble2x32(uvec2(0u, 0x7ff80000u))
#define D_INF packDouble2x32(uvec2(0u, 0x7ff00000u))

// 2^k * y for |k| up to ~2000, in two steps so that subnormal results are rounded once.
double scale2(double y, int k) {
    int k1 = clamp(k, -1022, 1023);
    y *= packDouble2x32(uvec2(0u, uint(k1 + 1023) << 20));
    k -= k1;
    return k == 0 ? y : y * packDouble2x32(uvec2(0u, uint(clamp(k, -1022, 1023) + 1023) << 20));
}

const double LN2_HI64 = 6.93147180369123816490e-01lf;   // 32 trailing zero bits: k * LN2_HI64 is exact
const double LN2_LO64 = 1.90821492927058770002e-10lf;

// e^x: x = k ln2 + r, e^r = 1 + r + r c(r)/(2 - c(r)) with fdlibm's Remez polynomial c.
double vexp(double x) {
    if (isnan(x)) return x;
    if (x > 709.782712893383973096lf) return D_INF;
    if (x < -745.13321910194110842lf) return 0.0lf;
    double k = roundEven(x * 1.44269504088896338700lf);
    precise double hi = x - k * LN2_HI64;
    precise double lo = k * LN2_LO64;
    precise double r = hi - lo;
    double z = r * r;
    double c = r - z * (1.66666666666666019037e-01lf + z * (-2.77777777770155933842e-03lf
               + z * (6.61375632143793436117e-05lf + z * (-1.65339022054652515390e-06lf + z * 4.13813679705723846039e-08lf))));
    precise double y = 1.0lf - ((lo - (r * c) / (2.0lf - c)) - hi);
    return scale2(y, int(k));
}

// e^x - 1: the Taylor series to x^14 on |x| < ln2/2 (no cancellation), e^x - 1 beyond.
double vexpm1(double x) {
    if (x == 0.0lf) return x;                      // -0 stays -0
    if (abs(x) < 0.34657359027997264lf) {
        double p = 1.1470745597729725e-11lf;                                   // 1/14!
        p = 1.6059043836821613e-10lf + x * p; p = 2.08767569878681e-09lf + x * p; p = 2.505210838544172e-08lf + x * p;
        p = 2.755731922398589e-07lf + x * p; p = 2.7557319223985893e-06lf + x * p; p = 2.48015873015873e-05lf + x * p;
        p = 0.0001984126984126984lf + x * p; p = 0.001388888888888889lf + x * p; p = 0.008333333333333333lf + x * p;
        p = 0.041666666666666664lf + x * p; p = 0.16666666666666666lf + x * p; p = 0.5lf + x * p;
        return x + x * x * p;
    }
    return vexp(x) - 1.0lf;
}

// log(x): x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2+f),
// log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)) with fdlibm's polynomial R.
double vlog(double x) {
    if (isnan(x) || x < 0.0lf) return D_NAN;
    if (x == 0.0lf) return -D_INF;
    if (isinf(x)) return x;
    int e = 0;
    if (x < 2.2250738585072014e-308lf) { x *= 18014398509481984.0lf; e = -54; }   // subnormal: scale by 2^54
    uvec2 w = unpackDouble2x32(x);
    e += int(w.y >> 20) - 1023;
    double m = packDouble2x32(uvec2(w.x, (w.y & 0x000fffffu) | 0x3ff00000u));   // [1, 2)
    if (m > 1.4142135623730951lf) { m *= 0.5lf; e += 1; }
    double f = m - 1.0lf;
    double s = f / (2.0lf + f);
    double z = s * s, z2 = z * z;
    double t1 = z2 * (3.999999999940941908e-01lf + z2 * (2.222219843214978396e-01lf + z2 * 1.531383769920937332e-01lf));
    double t2 = z * (6.666666666666735130e-01lf + z2 * (2.857142874366239149e-01lf + z2 * (1.818357216161805012e-01lf
                + z2 * 1.479819860511658591e-01lf)));
    double hfsq = 0.5lf * f * f;
    double k = double(e);
    return k * LN2_HI64 - ((hfsq - (s * (hfsq + t2 + t1) + k * LN2_LO64)) - f);
}

// log(1 + u) for u >= 0 (softplus): compensates the rounding of 1 + u.
double vlog1p(double u) {
    precise double w = 1.0lf + u;
    if (w == 1.0lf) return u;
    precise double err = (w - 1.0lf) - u;
    return vlog(w) - err / w;
}

// sin and cos: x = q pi/2 + r, |r| <= pi/4, then fdlibm's kernels on r. Below 2^20 pi/2 (k < 2^20) by
// Cody-Waite: pi/2 in three parts of which the first two have 33 bits, so k * part is exact; where that
// leaves |r| < 2^-20 (x near a multiple of pi/2: cancellation) and beyond 2^20 pi/2, by Payne-Hanek.
double sin_poly(double r) {
    double z = r * r;
    return r + z * r * (-1.66666666666666324348e-01lf + z * (8.33333333332248946124e-03lf + z * (-1.98412698298579493134e-04lf
           + z * (2.75573137070700676789e-06lf + z * (-2.50507602534068634195e-08lf + z * 1.58969099521155010221e-10lf)))));
}
double cos_poly(double r) {
    double z = r * r, z2 = z * z;
    double q = z * (4.16666666666666019037e-02lf + z * (-1.38888888888741095749e-03lf + z * 2.48015872894767294178e-05lf))
               + z2 * z2 * (-2.75573143513906633035e-07lf + z * (2.08757232129817482790e-09lf + z * -1.13596475577881948265e-11lf));
    double hz = 0.5lf * z;
    precise double w = 1.0lf - hz;
    return w + (((1.0lf - w) - hz) + z * q);
}
// Payne-Hanek (math.glsl's pio2_bits) for double: ax = M 2^e with M of 53 bits; f (pi/2) with pi/2 in two parts.
double reduce_pio2(double ax, out int q) {
    uvec2 w = unpackDouble2x32(ax);
    uvec4 f;
    bool neg;
    q = pio2_bits(w.x, (w.y & 0x000fffffu) | 0x00100000u, int(w.y >> 20) - 1075, f, neg);
    double v = ((double(f.w) * 2.3283064365386963e-10lf + double(f.z) * 5.421010862427522e-20lf)
               + double(f.y) * 1.2621774483536189e-29lf) + double(f.x) * 2.938735877055719e-39lf;
    v = v * 1.5707963267948966lf + v * 6.123233995736766e-17lf;
    return neg ? -v : v;
}
double vsincos(double x, bool want_cos) {
    if (isnan(x) || isinf(x)) return D_NAN;
    double ax = abs(x);
    precise double r;                              // precise: no fusing or reordering of the reduction
    int q;
    double k = roundEven(ax * 6.36619772367581382433e-01lf);
    if (k < 1048576.0lf) {                         // Cody-Waite: every product below exact
        r = ((ax - k * 1.57079632673412561417e+00lf) - k * 6.07710050630396597660e-11lf) - k * 2.02226624871116645580e-21lf;
        q = int(k);
    }
    if (k >= 1048576.0lf || (k != 0.0lf && abs(r) < 9.5367431640625e-07lf)) r = reduce_pio2(ax, q);
    q = (q + (want_cos ? 1 : 0)) & 3;             // cos(x) = sin(x + pi/2)
    double v = ((q & 1) == 0) ? sin_poly(r) : cos_poly(r);
    v = (q & 2) == 0 ? v : -v;
    return (!want_cos && (unpackDouble2x32(x).y >> 31) != 0u) ? -v : v;   // sin is odd (-0 too), cos even
}

// tanh as fdlibm: -t/(t + 2) with t = expm1(-2|x|) below 1, 1 - 2/(expm1(2|x|) + 2) from 1, 1 from 22.
double vtanh(double x) {
    if (isnan(x) || x == 0.0lf) return x;
    double a = abs(x), z;
    if (a >= 22.0lf) z = 1.0lf;
    else if (a >= 1.0lf) z = 1.0lf - 2.0lf / (vexpm1(2.0lf * a) + 2.0lf);
    else { double t = vexpm1(-2.0lf * a); z = -t / (t + 2.0lf); }
    return x < 0.0lf ? -z : z;
}

double vsigmoid(double x) { return 1.0lf / (1.0lf + vexp(-x)); }

// erf and erfc as fdlibm's s_erf.c: a rational R on |x| < 0.84375 (erf = x + x R(x^2)), another around 1
// (|x| < 1.25: erf = erx + P/Q), and erfc(x) = exp(-x^2 - 0.5625 + R/S(1/x^2)) / x beyond, with -x^2
// split as -z^2 + (z - x)(z + x), z = x with its low 32 bits cleared (z^2 exact).
const double ERX64 = 8.45062911510467529297e-01lf;
double erf_small(double z) {   // R(z), z = x^2, |x| < 0.84375
    double p = 1.28379167095512558561e-01lf + z * (-3.25042107247001499370e-01lf + z * (-2.84817495755985104766e-02lf
               + z * (-5.77027029648944159157e-03lf + z * -2.37630166566501626084e-05lf)));
    double q = 1.0lf + z * (3.97917223959155352819e-01lf + z * (6.50222499887672944485e-02lf + z * (5.08130628187576562776e-03lf
               + z * (1.32494738004321644526e-04lf + z * -3.96022827877536812320e-06lf))));
    return p / q;
}
double erf_near1(double s) {   // P/Q, s = |x| - 1, 0.84375 <= |x| < 1.25
    double p = -2.36211856075265944077e-03lf + s * (4.14856118683748331666e-01lf + s * (-3.72207876035701323847e-01lf
               + s * (3.18346619901161753674e-01lf + s * (-1.10894694282396677476e-01lf + s * (3.54783043256182359371e-02lf
               + s * -2.16637559486879084300e-03lf)))));
    double q = 1.0lf + s * (1.06420880400844228286e-01lf + s * (5.40397917702171048937e-01lf + s * (7.18286544141962662868e-02lf
               + s * (1.26171219808761642112e-01lf + s * (1.36370839120290507362e-02lf + s * 1.19844998467991074170e-02lf)))));
    return p / q;
}
double erfc_tail(double a) {   // erfc(a) for 1.25 <= a < 28
    double s = 1.0lf / (a * a), r, q;
    if (a < 2.857142857142857lf) {
        r = -9.86494403484714822705e-03lf + s * (-6.93858572707181764372e-01lf + s * (-1.05586262253232909814e+01lf
            + s * (-6.23753324503260060396e+01lf + s * (-1.62396669462573470355e+02lf + s * (-1.84605092906711035994e+02lf
            + s * (-8.12874355063065934246e+01lf + s * -9.81432934416914548592e+00lf))))));
        q = 1.0lf + s * (1.96512716674392571292e+01lf + s * (1.37657754143519042600e+02lf + s * (4.34565877475229228821e+02lf
            + s * (6.45387271733267880336e+02lf + s * (4.29008140027567833386e+02lf + s * (1.08635005541779435134e+02lf
            + s * (6.57024977031928170135e+00lf + s * -6.04244152148580987438e-02lf)))))));
    } else {
        r = -9.86494292470009928597e-03lf + s * (-7.99283237680523006574e-01lf + s * (-1.77579549177547519889e+01lf
            + s * (-1.60636384855821916062e+02lf + s * (-6.37566443368389627722e+02lf + s * (-1.02509513161107724954e+03lf
            + s * -4.83519191608651397019e+02lf)))));
        q = 1.0lf + s * (3.03380607434824582924e+01lf + s * (3.25792512996573918826e+02lf + s * (1.53672958608443695994e+03lf
            + s * (3.19985821950859553908e+03lf + s * (2.55305040643316442583e+03lf + s * (4.74528541206955367215e+02lf
            + s * -2.24409524465858183362e+01lf))))));
    }
    double z = packDouble2x32(uvec2(0u, unpackDouble2x32(a).y));
    precise double zz = z * z, d = (z - a) * (z + a);
    return vexp(-zz - 0.5625lf) * vexp(d + r / q) / a;
}
double verf(double x) {
    if (isnan(x)) return x;
    double a = abs(x), v;
    if (a < 0.84375lf) return x + x * erf_small(x * x);
    if (a < 1.25lf) v = ERX64 + erf_near1(a - 1.0lf);
    else if (a >= 6.0lf) v = 1.0lf;
    else v = 1.0lf - erfc_tail(a);
    return x < 0.0lf ? -v : v;
}
double verfc(double x) {
    if (isnan(x)) return x;
    double a = abs(x);
    if (a < 0.84375lf) {
        double y = x * erf_small(x * x);
        return x < 0.25lf ? 1.0lf - (x + y) : 0.5lf - (y + (x - 0.5lf));
    }
    if (a < 1.25lf) {
        double p = erf_near1(a - 1.0lf);
        return x >= 0.0lf ? (1.0lf - ERX64) - p : 1.0lf + (ERX64 + p);
    }
    if (a >= 28.0lf) return x > 0.0lf ? 0.0lf : 2.0lf;
    if (x < 0.0lf && a >= 6.0lf) return 2.0lf;
    double r = erfc_tail(a);
    return x > 0.0lf ? r : 2.0lf - r;
}

double vdiv(double a, double b) { return a / b; }   // (float64 division is correctly rounded)

// pow with C99/numpy special cases; the general case is e^(y log|x|).
double vpow(double x, double y) {
    if (y == 0.0lf || x == 1.0lf) return 1.0lf;
    if (isnan(x) || isnan(y)) return D_NAN;
    double ax = abs(x);
    bool yint = floor(y) == y;
    bool yodd = yint && abs(y) < 9007199254740992.0lf && mod(abs(y), 2.0lf) == 1.0lf;
    bool xneg = (unpackDouble2x32(x).y >> 31) != 0u;
    if (isinf(y)) return ax == 1.0lf ? 1.0lf : ((ax > 1.0lf) == (y > 0.0lf) ? D_INF : 0.0lf);
    double r;
    if (ax == 0.0lf) r = y > 0.0lf ? 0.0lf : D_INF;
    else if (isinf(ax)) r = y > 0.0lf ? D_INF : 0.0lf;
    else if (x < 0.0lf && !yint) return D_NAN;
    else r = vexp(y * vlog(ax));
    return (xneg && yodd) ? -r : r;
}

// softplus and clamp, as generated.glsl's float versions.
double vsoftplus(double x, double beta, double threshold) {
    double bx = beta * x;
    return bx > threshold ? x : vlog1p(vexp(bx)) / beta;
}
double vclamp(double v, double lo, double hi) {
    if (isnan(v) || isnan(lo) || isnan(hi)) return D_NAN;
    return min(max(v, lo), hi);
}
#endif

import sys, time, os
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import vkml, real_models as rm
for case in sys.argv[1:]:
    spec = rm.case_specs(True)[case]
    weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
    data = spec["data"](4)
    _m, run = rm.vk_setup(spec, weights, "jit")
    for i in range(5): run(data[i % 4])
    f = [c.cell_contents for c in run.__closure__ if hasattr(c.cell_contents, 'captures')][0]
    (st,), = f.captures.values()
    t0 = time.perf_counter()
    for _ in range(200): assert st.holds()
    print(case, "guards", len(st.guards), "holds() us", round((time.perf_counter() - t0) / 200 * 1e6, 1))

"""The tensor-core kernels run only where the driver lists what they need: `coopmat_f16` is read from
the cooperative-matrix feature and the driver's list of configurations (a 16x16x16 f16 x f16 + f32
subgroup one), with subgroups of 32. lavapipe has no cooperative matrices, so the driver's answers are
stood in by a cffi callback; the structs and calls are the real ones."""
import types
import pytest
import vkml.backends.vulkan.device as D

pytestmark = pytest.mark.vulkan
CB = "VkResult(VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*)"


def _fake_vk(vk, configs, feature=1):
    ffi = vk.ffi
    @ffi.callback(CB)
    def get(pd, n, props):
        if props == ffi.NULL: n[0] = len(configs); return 0
        for i, c in enumerate(configs[:n[0]]):
            assert props[i].sType == vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR   # set before the call
            for k, v in c.items(): setattr(props[i], k, v)
        return 0
    class Lib:
        def __getattr__(self, k): return getattr(vk.lib, k)
        def vkGetPhysicalDeviceFeatures2(self, pd, f2):
            vk.lib.vkGetPhysicalDeviceFeatures2(pd, f2)
            ffi.cast("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*", f2.pNext).cooperativeMatrix = feature
        def vkGetInstanceProcAddr(self, inst, name): return ffi.cast("PFN_vkVoidFunction", get)
    fake = types.SimpleNamespace(ffi=ffi, lib=Lib(), **{k: getattr(vk, k) for k in dir(vk) if k.startswith("VK_")})
    fake._keep = get
    return fake


def test_coopmat_f16_detection():
    vk = D.vk_module()
    info = D.devices()[0]
    F16, F32, SUB = vk.VK_COMPONENT_TYPE_FLOAT16_KHR, vk.VK_COMPONENT_TYPE_FLOAT32_KHR, vk.VK_SCOPE_SUBGROUP_KHR
    good = dict(MSize=16, NSize=16, KSize=16, AType=F16, BType=F16, CType=F32, ResultType=F32, scope=SUB)
    ext = frozenset({"VK_KHR_cooperative_matrix"})
    detect = lambda configs, sub=32, mm=True, feature=1, exts=ext: D._coopmat_f16(_fake_vk(vk, configs, feature), info.handle, exts, sub, mm)
    assert detect([dict(good, MSize=8), good]) is True
    assert detect([dict(good, CType=F16, ResultType=F16)]) is False     # f16 accumulators only
    assert detect([]) is False
    assert detect([good], sub=64) is False                             # the kernels assume subgroups of 32
    assert detect([good], mm=False) is False                           # no Vulkan memory model
    assert detect([good], feature=0) is False
    assert detect([good], exts=frozenset()) is False
    assert info.features["coopmat_f16"] is False or info.type != "cpu"  # lavapipe: the plain kernels


def test_the_feature_chain_owns_what_it_points_to():
    "Regression: the cooperative-matrix feature struct was built in place in `pNext` and freed at once (the H200's"
    " vkCreateDevice crashed reading it); every struct of the chain must be kept by the device."
    import gc
    vk = D.vk_module()
    f = dict(D.devices()[0].features, coopmat_f16=True)
    feats, exts, owners = D.device_features(vk, f)
    gc.collect()
    ffi = vk.ffi
    f12 = ffi.cast("VkPhysicalDeviceVulkan12Features*", feats.pNext)
    f11 = ffi.cast("VkPhysicalDeviceVulkan11Features*", f12.pNext)
    cm = ffi.cast("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*", f11.pNext)
    addr = lambda o: ffi.cast("void*", ffi.addressof(o) if ffi.typeof(o).kind == "struct" else o)
    owning = [o for o in owners if "owning" in repr(o)]
    assert any(addr(o) == ffi.cast("void*", cm) for o in owning)
    assert cm.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR and cm.cooperativeMatrix
    assert f12.vulkanMemoryModel and "VK_KHR_cooperative_matrix" in exts

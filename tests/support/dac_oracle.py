#!/usr/bin/env python3
"""The runtime's own DAC as an oracle for the tests: every object of a Linux core's GC heap, as SOS sees it.

    python tests/support/dac_oracle.py CORE LIBMSCORDACCORE [--names] [--strings] [--fields]

It hosts ``libmscordaccore.so`` (shipped beside each Linux runtime's ``libcoreclr.so``) with ctypes: an
``ICLRDataTarget`` over the core file (memory from its PT_LOAD segments, image bytes the core left out read
from the files its NT_FILE note names, as ClrMD and lldb do), then ``IXCLRDataProcess`` ->
``ISOSDacInterface`` (+ ``ISOSDacInterface8`` for the generation table of .NET 5+).  The heap is listed the
way ClrMD does it for SOS's ``dumpheap``: the segments or regions of every GC heap from the DAC, each walked
from its first object to its allocated end (the ephemeral one to the heap's ``alloc_allocated``), every
object's MethodTable and size from ``GetObjectData``, allocation contexts (every thread's and each heap's
own) stepped over.  Nothing of clrlayout is used.

It prints one JSON document: the segments, every object ``[address, method_table, size]`` in heap order,
the String, free, Object and Exception MethodTables (``GetUsefulGlobals``), and on request the name of every MethodTable (``GetMethodTableName``),
every string's UTF-16 bytes (``GetObjectStringData``) and every MethodTable's instance fields
(``GetMethodTableFieldData`` / ``GetFieldDescData``).  Test-time only: never part of the product.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from bisect import bisect_right
from ctypes import POINTER, byref, c_int32, c_int16, c_uint16, c_uint32, c_uint64, c_void_p

HRESULT = c_int32
S_OK = 0
E_FAIL = -2147467259  # 0x80004005
E_NOTIMPL = -2147467263  # 0x80004001
E_NOINTERFACE = -2147467262  # 0x80004002
IMAGE_FILE_MACHINE_AMD64 = 0x8664
IMAGE_FILE_MACHINE_I386 = 0x014C
IMAGE_FILE_MACHINE_ARM64 = 0xAA64


class GUID(ctypes.Structure):
    _fields_ = [("d1", c_uint32), ("d2", c_uint16), ("d3", c_uint16), ("d4", ctypes.c_ubyte * 8)]

    @classmethod
    def of(cls, text: str) -> "GUID":
        h = text.replace("-", "")
        return cls(int(h[0:8], 16), int(h[8:12], 16), int(h[12:16], 16), (ctypes.c_ubyte * 8)(*bytes.fromhex(h[16:])))

    def key(self) -> bytes:
        return bytes(self)


IID_IUnknown = GUID.of("00000000-0000-0000-C000-000000000046")
IID_ICLRDataTarget = GUID.of("3E11CCEE-D08B-43e5-AF01-32717A64DA03")
IID_ICLRRuntimeLocator = GUID.of("b760bf44-9377-4597-8be7-58083bdc5146")
IID_IXCLRDataProcess = GUID.of("5c552ab6-fc09-4cb3-8e36-22fa03c798b7")
IID_ISOSDacInterface = GUID.of("436f00f2-b42a-4b9f-870c-e73db66ae930")
IID_ISOSDacInterface8 = GUID.of("c12f35a9-e55c-4520-a894-b3dc5165dfce")
#: ISOSDacInterface6 (sospriv.idl; ClrMD's SOSDac6): GetMethodTableCollectibleData
IID_ISOSDacInterface6 = GUID.of("11206399-4B66-4EDB-98EA-85654E59AD45")
#: ISOSDacInterface14 (.NET 9+; sospriv.idl): GetStaticBaseAddress
IID_ISOSDacInterface14 = GUID.of("9aa22aca-6dc6-4a0c-b4e0-70d2416b9837")
#: ISOSDacInterface13 (.NET 8+): the new IID, then the one of its first version (ClrMD asks for both)
IID_ISOSDacInterface13 = [GUID.of("3176a8ed-597b-4f54-a71f-83695c6a8c5e"),
                          GUID.of("3176a8ed-597b-4f54-a71f-83695c6a8c5d")]

CLRDATA_ADDRESS = c_uint64


# --- the structures the DAC fills (dacprivate.h, as ClrMD declares them) ---------------------------------

class GCInfo(ctypes.Structure):
    _fields_ = [("ServerMode", c_int32), ("GCStructuresValid", c_int32), ("HeapCount", c_int32),
                ("MaxGeneration", c_int32)]


class GenerationData(ctypes.Structure):
    _fields_ = [("StartSegment", CLRDATA_ADDRESS), ("AllocationStart", CLRDATA_ADDRESS),
                ("AllocContextPtr", CLRDATA_ADDRESS), ("AllocContextLimit", CLRDATA_ADDRESS)]


class HeapDetails(ctypes.Structure):
    _fields_ = [("Address", CLRDATA_ADDRESS), ("Allocated", CLRDATA_ADDRESS), ("MarkArray", CLRDATA_ADDRESS),
                ("CurrentGCState", CLRDATA_ADDRESS), ("NextSweepObj", CLRDATA_ADDRESS),
                ("SavedSweepEphemeralSeg", CLRDATA_ADDRESS), ("SavedSweepEphemeralStart", CLRDATA_ADDRESS),
                ("BackgroundSavedLowestAddress", CLRDATA_ADDRESS), ("BackgroundSavedHighestAddress", CLRDATA_ADDRESS),
                ("GenerationTable", GenerationData * 4), ("EphemeralHeapSegment", CLRDATA_ADDRESS),
                ("FinalizationFillPointers", CLRDATA_ADDRESS * 7), ("LowestAddress", CLRDATA_ADDRESS),
                ("HighestAddress", CLRDATA_ADDRESS), ("CardTable", CLRDATA_ADDRESS)]


class SegmentData(ctypes.Structure):
    _fields_ = [("Address", CLRDATA_ADDRESS), ("Allocated", CLRDATA_ADDRESS), ("Committed", CLRDATA_ADDRESS),
                ("Reserved", CLRDATA_ADDRESS), ("Used", CLRDATA_ADDRESS), ("Start", CLRDATA_ADDRESS),
                ("Next", CLRDATA_ADDRESS), ("Heap", CLRDATA_ADDRESS), ("HighAllocMark", CLRDATA_ADDRESS),
                ("Flags", c_uint64), ("BackgroundAllocated", CLRDATA_ADDRESS)]


class ObjectData(ctypes.Structure):
    _fields_ = [("MethodTable", CLRDATA_ADDRESS), ("ObjectType", c_uint32), ("Size", c_uint64),
                ("ElementTypeHandle", CLRDATA_ADDRESS), ("ElementType", c_uint32), ("Rank", c_uint32),
                ("NumComponents", c_uint64), ("ComponentSize", c_uint64), ("ArrayDataPointer", CLRDATA_ADDRESS),
                ("ArrayBoundsPointer", CLRDATA_ADDRESS), ("ArrayLowerBoundsPointer", CLRDATA_ADDRESS),
                ("RCW", CLRDATA_ADDRESS), ("CCW", CLRDATA_ADDRESS)]


class MethodTableData(ctypes.Structure):
    _fields_ = [("IsFree", c_uint32), ("Module", CLRDATA_ADDRESS), ("EEClass", CLRDATA_ADDRESS),
                ("ParentMethodTable", CLRDATA_ADDRESS), ("NumInterfaces", c_uint16), ("NumMethods", c_uint16),
                ("NumVtableSlots", c_uint16), ("NumVirtuals", c_uint16), ("BaseSize", c_uint32),
                ("ComponentSize", c_uint32), ("Token", c_uint32), ("AttrClass", c_uint32), ("Shared", c_uint32),
                ("Dynamic", c_uint32), ("ContainsPointers", c_uint32)]


class MethodTableFieldInfo(ctypes.Structure):
    _fields_ = [("NumInstanceFields", c_uint16), ("NumStaticFields", c_uint16), ("NumThreadStaticFields", c_uint16),
                ("FirstField", CLRDATA_ADDRESS), ("ContextStaticOffset", c_int16),
                ("ContextStaticsSize", c_int16)]


class FieldData(ctypes.Structure):
    _fields_ = [("ElementType", c_uint32), ("SigType", c_uint32), ("TypeMethodTable", CLRDATA_ADDRESS),
                ("TypeModule", CLRDATA_ADDRESS), ("TypeToken", c_uint32), ("FieldToken", c_uint32),
                ("MTOfEnclosingClass", CLRDATA_ADDRESS), ("Offset", c_uint32), ("IsThreadLocal", c_uint32),
                ("IsContextLocal", c_uint32), ("IsStatic", c_uint32), ("NextField", CLRDATA_ADDRESS)]


class CommonMethodTables(ctypes.Structure):
    _fields_ = [("ArrayMethodTable", CLRDATA_ADDRESS), ("StringMethodTable", CLRDATA_ADDRESS),
                ("ObjectMethodTable", CLRDATA_ADDRESS), ("ExceptionMethodTable", CLRDATA_ADDRESS),
                ("FreeMethodTable", CLRDATA_ADDRESS)]


class ThreadStoreData(ctypes.Structure):
    _fields_ = [("ThreadCount", c_int32), ("UnstartedThreadCount", c_int32), ("BackgroundThreadCount", c_int32),
                ("PendingThreadCount", c_int32), ("DeadThreadCount", c_int32), ("FirstThread", CLRDATA_ADDRESS),
                ("FinalizerThread", CLRDATA_ADDRESS), ("GCThread", CLRDATA_ADDRESS), ("HostConfig", c_uint32)]


class ThreadData(ctypes.Structure):
    _fields_ = [("ManagedThreadId", c_uint32), ("OSThreadId", c_uint32), ("State", c_int32),
                ("PreemptiveGCDisabled", c_uint32), ("AllocContextPtr", CLRDATA_ADDRESS),
                ("AllocContextLimit", CLRDATA_ADDRESS), ("Context", CLRDATA_ADDRESS), ("Domain", CLRDATA_ADDRESS),
                ("Frame", CLRDATA_ADDRESS), ("LockCount", c_uint32), ("FirstNestedException", CLRDATA_ADDRESS),
                ("Teb", CLRDATA_ADDRESS), ("FiberData", CLRDATA_ADDRESS), ("LastThrownObjectHandle", CLRDATA_ADDRESS),
                ("NextThread", CLRDATA_ADDRESS)]


class AppDomainStoreData(ctypes.Structure):
    _fields_ = [("SharedDomain", CLRDATA_ADDRESS), ("SystemDomain", CLRDATA_ADDRESS), ("DomainCount", c_int32)]


class AppDomainData(ctypes.Structure):
    _fields_ = [("AppDomainPtr", CLRDATA_ADDRESS), ("AppSecDesc", CLRDATA_ADDRESS),
                ("LowFrequencyHeap", CLRDATA_ADDRESS), ("HighFrequencyHeap", CLRDATA_ADDRESS),
                ("StubHeap", CLRDATA_ADDRESS), ("DomainLocalBlock", CLRDATA_ADDRESS),
                ("DomainLocalModules", CLRDATA_ADDRESS), ("Id", c_uint32), ("AssemblyCount", c_int32),
                ("FailedAssemblyCount", c_int32), ("Stage", c_int32)]


class JitManagerInfo(ctypes.Structure):
    _fields_ = [("Address", CLRDATA_ADDRESS), ("CodeType", c_uint32), ("HeapList", CLRDATA_ADDRESS)]


class JitCodeHeapInfo(ctypes.Structure):
    # codeHeapType (CODEHEAP_LOADER 0, CODEHEAP_HOST 1), then a union: the LoaderHeap, or the host heap's
    # base and current address
    _fields_ = [("Kind", c_uint32), ("Address", CLRDATA_ADDRESS), ("CurrentAddress", CLRDATA_ADDRESS)]


#: VISITHEAP: void (*)(CLRDATA_ADDRESS blockData, size_t blockSize, BOOL blockIsCurrentBlock)
VISITHEAP = ctypes.CFUNCTYPE(None, c_uint64, ctypes.c_size_t, c_int32)

# ISOSDacInterface vtable slots (IUnknown is 0-2; sospriv.idl order, as ClrMD's ISOSDacVTable lists it)
SOS = {"GetThreadStoreData": 3, "GetAppDomainStoreData": 4, "GetAppDomainList": 5, "GetAppDomainData": 6,
       "GetModuleData": 13, "GetThreadData": 17, "GetMethodDescPtrFromIP": 21, "GetMethodDescName": 22,
       "GetMethodDescPtrFromFrame": 23, "GetCodeHeaderData": 26, "GetJitManagerList": 27, "GetFrameName": 43, "GetObjectData": 33, "GetObjectStringData": 34,
       "GetMethodTableName": 36, "GetMethodTableData": 37, "GetMethodTableFieldData": 39, "GetFieldDescData": 42,
       "GetGCHeapData": 46, "GetGCHeapList": 47, "GetGCHeapDetails": 48, "GetGCHeapStaticData": 49,
       "GetHeapSegmentData": 50, "GetDomainLocalModuleDataFromModule": 57,
       "GetThreadLocalModuleData": 58, "GetHandleEnum": 61, "GetStackReferences": 79, "TraverseLoaderHeap": 67, "GetCodeHeapList": 68, "TraverseVirtCallStubHeap": 69,
       "GetUsefulGlobals": 70}
SOS6 = {"GetMethodTableCollectibleData": 3}
SOS14 = {"GetStaticBaseAddress": 3}


#: what DacpDomainLocalModuleData and DacpThreadLocalModuleData hold after their two inputs
_STATICS_BLOCKS = [("ClassData", CLRDATA_ADDRESS), ("DynamicClassTable", CLRDATA_ADDRESS),
                   ("GCStaticDataStart", CLRDATA_ADDRESS), ("NonGCStaticDataStart", CLRDATA_ADDRESS)]


class DomainLocalModuleData(ctypes.Structure):
    _fields_ = [("AppDomainAddr", CLRDATA_ADDRESS), ("ModuleID", c_uint64), *_STATICS_BLOCKS]


class ThreadLocalModuleData(ctypes.Structure):
    _fields_ = [("ThreadAddr", CLRDATA_ADDRESS), ("ModuleIndex", c_uint64), *_STATICS_BLOCKS]


class ModuleData(ctypes.Structure):
    _fields_ = [("Address", CLRDATA_ADDRESS), ("PEAssembly", CLRDATA_ADDRESS), ("ILBase", CLRDATA_ADDRESS),
                ("MetadataStart", CLRDATA_ADDRESS), ("MetadataSize", c_uint64), ("Assembly", CLRDATA_ADDRESS),
                ("IsReflection", c_uint32), ("IsPEFile", c_uint32), ("BaseClassIndex", c_uint64),
                ("ModuleID", c_uint64), ("TransientFlags", c_uint32)] \
        + [(n, CLRDATA_ADDRESS) for n in ("TypeDefToMethodTableMap", "TypeRefToMethodTableMap", "MethodDefToDescMap",
                                          "FieldDefToDescMap", "MemberRefToDescMap", "FileReferencesMap",
                                          "ManifestModuleReferencesMap", "LoaderAllocator", "ThunkHeap")] \
        + [("ModuleIndex", c_uint64)]


SOS8 = {"GetNumberGenerations": 3, "GetGenerationTable": 4, "GetGenerationTableSvr": 6}
SOS13 = {"TraverseLoaderHeap": 3, "GetDomainLoaderAllocator": 4, "GetLoaderAllocatorHeapNames": 5,
         "GetLoaderAllocatorHeaps": 6, "GetHandleTableMemoryRegions": 7, "GetGCBookkeepingMemoryRegions": 8,
         "GetGCFreeRegions": 9}
#: ISOSMemoryEnum (ISOSEnum: Skip, Reset, GetCount; then Next)
MEMORY_ENUM = {"Next": 6}
#: ISOSHandleEnum: the same, its Next gives SOSHandleData
HANDLE_ENUM = {"Next": 6}
STACK_REF_ENUM = {"Next": 6}
#: IXCLRDataProcess (xclrdata.idl, as ClrMD's IXCLRDataProcessVTable lists it), IXCLRDataTask, IXCLRDataStackWalk
XCLR_PROCESS = {"GetTaskByOSThreadID": 7}
XCLR_TASK = {"CreateStackWalk": 11}
XCLR_STACK_WALK = {"GetContext": 3, "Next": 5, "Request": 9}
#: CLRDATA_SIMPFRAME_UNRECOGNIZED | MANAGED_METHOD | RUNTIME_MANAGED_CODE | RUNTIME_UNMANAGED_CODE (ClrMD's 0xf)
STACK_WALK_ALL = 0xF
#: DACSTACKPRIV_REQUEST_FRAME_DATA: the explicit Frame the walk is on (0: a managed frame)
REQUEST_FRAME_DATA = 0xF0000000
#: CONTEXT_AMD64 | CONTEXT_CONTROL | CONTEXT_INTEGER | CONTEXT_SEGMENTS | CONTEXT_FLOATING_POINT
CONTEXT_AMD64_FULL = 0x10001F


class SOSHandleData(ctypes.Structure):
    _fields_ = [("AppDomain", CLRDATA_ADDRESS), ("Handle", CLRDATA_ADDRESS), ("Secondary", CLRDATA_ADDRESS),
                ("Type", c_uint32), ("StrongReference", c_int32), ("RefCount", c_uint32),
                ("JupiterRefCount", c_uint32), ("IsPegged", c_int32)]


class SOSStackRefData(ctypes.Structure):
    _fields_ = [("HasRegisterInformation", c_int32), ("Register", c_int32), ("Offset", c_int32),
                ("Address", CLRDATA_ADDRESS), ("Object", CLRDATA_ADDRESS), ("Flags", c_uint32),
                ("SourceType", c_uint32), ("Source", CLRDATA_ADDRESS), ("StackPointer", CLRDATA_ADDRESS)]


#: where winnt.h's AMD64 CONTEXT keeps each register, and the order of Linux's user_regs_struct (NT_PRSTATUS)
CONTEXT_AMD64 = {"Rax": 0x78, "Rcx": 0x80, "Rdx": 0x88, "Rbx": 0x90, "Rsp": 0x98, "Rbp": 0xA0, "Rsi": 0xA8,
                 "Rdi": 0xB0, "R8": 0xB8, "R9": 0xC0, "R10": 0xC8, "R11": 0xD0, "R12": 0xD8, "R13": 0xE0,
                 "R14": 0xE8, "R15": 0xF0, "Rip": 0xF8}
CONTEXT_AMD64_SIZE = 0x4D0
USER_REGS = ("R15", "R14", "R13", "R12", "Rbp", "Rbx", "R11", "R10", "R9", "R8", "Rax", "Rcx", "Rdx", "Rsi",
             "Rdi", "orig_rax", "Rip", "cs", "EFlags", "Rsp", "ss")


class MemoryRegion(ctypes.Structure):
    _fields_ = [("Start", CLRDATA_ADDRESS), ("Size", CLRDATA_ADDRESS), ("ExtraData", CLRDATA_ADDRESS),
                ("Heap", c_int32)]
#: VCSHeapType of TraverseVirtCallStubHeap
STUB_HEAPS = ("IndcellHeap", "LookupHeap", "ResolveHeap", "DispatchHeap", "CacheEntryHeap", "VtableHeap")


# --- the core file ---------------------------------------------------------------------------------------

class Core:
    """Memory of an ELF core: its PT_LOAD data, and for file mappings the core left out, the file itself."""

    def __init__(self, path: str):
        from elftools.elf.elffile import ELFFile

        self.f = open(path, "rb")
        elf = ELFFile(self.f)
        self.pointer_size = 8 if elf.elfclass == 64 else 4
        self.machine = {"EM_X86_64": IMAGE_FILE_MACHINE_AMD64, "EM_386": IMAGE_FILE_MACHINE_I386,
                        "EM_AARCH64": IMAGE_FILE_MACHINE_ARM64}[elf["e_machine"]]
        self.loads = []  # (vaddr, filesz, offset)
        self.contexts: dict[int, dict] = {}  # thread id -> its registers (NT_PRSTATUS)
        self.files = []  # (vm_start, vm_end, file offset, path)
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_filesz"]:
                self.loads.append((seg["p_vaddr"], seg["p_filesz"], seg["p_offset"]))
            elif seg["p_type"] == "PT_NOTE":
                for note in seg.iter_notes():
                    if note["n_type"] == "NT_PRSTATUS" and self.machine == IMAGE_FILE_MACHINE_AMD64:
                        raw = note["n_desc"] if isinstance(note["n_desc"], bytes) else None
                        if raw is None:
                            self.f.seek(note["n_offset"] + 12 + ((note["n_namesz"] + 3) & ~3))
                            raw = self.f.read(note["n_descsz"])
                        tid = int.from_bytes(raw[32:36], "little")  # pr_pid
                        regs = [int.from_bytes(raw[112 + 8 * i : 120 + 8 * i], "little") for i in range(len(USER_REGS))]
                        self.contexts[tid] = dict(zip(USER_REGS, regs))
                    if note["n_type"] == "NT_FILE":
                        d = note["n_desc"]
                        page = d["page_size"]
                        offsets = [e["page_offset"] for e in d["Elf_Nt_File_Entry"]]
                        if any(offsets) and all(o % page == 0 for o in offsets):
                            page = 1  # createdump before 3.0 wrote byte offsets (lldb reads them so too)
                        for e, name in zip(d["Elf_Nt_File_Entry"], d["filename"]):
                            name = name.decode() if isinstance(name, bytes) else name
                            self.files.append((e["vm_start"], e["vm_end"], e["page_offset"] * page, name))
        self.loads.sort()
        self.starts = [s for s, _, _ in self.loads]
        self.files.sort()
        self.file_starts = [s for s, _, _, _ in self.files]
        self.handles: dict[str, object] = {}

    def image_base(self, name: str) -> int:
        bases = [lo for lo, _, _, p in self.files if os.path.basename(p) == name]
        return min(bases) if bases else 0

    def _from_core(self, address: int, size: int) -> bytes:
        i = bisect_right(self.starts, address) - 1
        if i < 0:
            return b""
        vaddr, filesz, offset = self.loads[i]
        if address >= vaddr + filesz:
            return b""
        n = min(size, vaddr + filesz - address)
        self.f.seek(offset + address - vaddr)
        return self.f.read(n)

    def _from_file(self, address: int, size: int) -> bytes:
        i = bisect_right(self.file_starts, address) - 1
        if i < 0:
            return b""
        lo, hi, offset, path = self.files[i]
        if address >= hi or not os.path.isfile(path):
            return b""
        f = self.handles.get(path)
        if f is None:
            f = self.handles[path] = open(path, "rb")
        f.seek(offset + address - lo)
        return f.read(min(size, hi - address))

    def read(self, address: int, size: int) -> bytes:
        out = b""
        while len(out) < size:
            at = address + len(out)
            part = self._from_core(at, size - len(out)) or self._from_file(at, size - len(out))
            if not part:
                break
            out += part
        return out


# --- ICLRDataTarget implemented in Python --------------------------------------------------------------

def _fn(*args):
    return ctypes.CFUNCTYPE(HRESULT, c_void_p, *args)


class DataTarget:
    """A COM object with two interfaces: ICLRDataTarget and ICLRRuntimeLocator."""

    def __init__(self, core: Core, runtime_base: int):
        self.core = core
        self.runtime_base = runtime_base
        self._keep = []

        def qi(this, iid, out):
            key = ctypes.cast(iid, POINTER(GUID))[0].key()
            if key in (IID_IUnknown.key(), IID_ICLRDataTarget.key()):
                ctypes.cast(out, POINTER(c_void_p))[0] = ctypes.addressof(self.target)
                return S_OK
            if key == IID_ICLRRuntimeLocator.key() and self.runtime_base:
                ctypes.cast(out, POINTER(c_void_p))[0] = ctypes.addressof(self.locator)
                return S_OK
            ctypes.cast(out, POINTER(c_void_p))[0] = None
            return E_NOINTERFACE

        def ref(this):
            return 1

        def machine(this, out):
            ctypes.cast(out, POINTER(c_uint32))[0] = core.machine
            return S_OK

        def pointer_size(this, out):
            ctypes.cast(out, POINTER(c_uint32))[0] = core.pointer_size
            return S_OK

        def image_base(this, name, out):
            text = ctypes.wstring_at(name) if ctypes.sizeof(ctypes.c_wchar) == 2 else _utf16z(name)
            base = core.image_base(os.path.basename(text.replace("\\", "/")))
            ctypes.cast(out, POINTER(c_uint64))[0] = base
            return S_OK if base else E_FAIL

        def read_virtual(this, address, buffer, size, done):
            data = core.read(address, size)
            if data:
                ctypes.memmove(buffer, data, len(data))
            if done:
                ctypes.cast(done, POINTER(c_uint32))[0] = len(data)
            return S_OK if data else E_FAIL

        def write_virtual(this, address, buffer, size, done):
            return E_NOTIMPL

        def tls(this, tid, index, value):
            return E_NOTIMPL

        def set_tls(this, tid, index, value):
            return E_NOTIMPL

        def current_thread(this, out):
            return E_NOTIMPL

        def context(this, tid, flags, size, buffer):
            regs = core.contexts.get(tid)
            if regs is None or size < CONTEXT_AMD64_SIZE:
                return E_FAIL
            ctypes.memset(buffer, 0, size)
            ctypes.cast(buffer + 0x30, POINTER(c_uint32))[0] = flags
            ctypes.cast(buffer + 0x44, POINTER(c_uint32))[0] = regs["EFlags"] & 0xFFFFFFFF
            for name, at in CONTEXT_AMD64.items():
                ctypes.cast(buffer + at, POINTER(c_uint64))[0] = regs[name]
            return S_OK

        def set_context(this, tid, size, buffer):
            return E_NOTIMPL

        def request(this, code, insize, inbuf, outsize, outbuf):
            return E_NOTIMPL

        def runtime(this, out):
            ctypes.cast(out, POINTER(c_uint64))[0] = self.runtime_base
            return S_OK

        unknown = [_fn(c_void_p, c_void_p)(qi), ctypes.CFUNCTYPE(c_uint32, c_void_p)(ref),
                   ctypes.CFUNCTYPE(c_uint32, c_void_p)(ref)]
        target = unknown + [
            _fn(c_void_p)(machine), _fn(c_void_p)(pointer_size), _fn(c_void_p, c_void_p)(image_base),
            _fn(c_uint64, c_void_p, c_uint32, c_void_p)(read_virtual),
            _fn(c_uint64, c_void_p, c_uint32, c_void_p)(write_virtual),
            _fn(c_uint32, c_uint32, c_void_p)(tls), _fn(c_uint32, c_uint32, c_uint64)(set_tls),
            _fn(c_void_p)(current_thread), _fn(c_uint32, c_uint32, c_uint32, c_void_p)(context),
            _fn(c_uint32, c_uint32, c_void_p)(set_context),
            _fn(c_uint32, c_uint32, c_void_p, c_uint32, c_void_p)(request)]
        locator = unknown + [_fn(c_void_p)(runtime)]
        self._keep += target + locator
        self.target_vtbl = (c_void_p * len(target))(*[ctypes.cast(f, c_void_p) for f in target])
        self.locator_vtbl = (c_void_p * len(locator))(*[ctypes.cast(f, c_void_p) for f in locator])
        self.target = c_void_p(ctypes.addressof(self.target_vtbl))
        self.locator = c_void_p(ctypes.addressof(self.locator_vtbl))


def _utf16z(address: int) -> str:
    out = bytearray()
    while True:
        unit = ctypes.string_at(address + len(out), 2)
        if unit == b"\0\0":
            return out.decode("utf-16-le")
        out += unit


class Interface:
    """A COM interface pointer of the DAC's, called by vtable slot."""

    def __init__(self, pointer: int, slots: dict):
        self.pointer = pointer
        self.slots = slots
        self.vtbl = ctypes.cast(ctypes.cast(pointer, POINTER(c_void_p))[0], POINTER(c_void_p))

    def call(self, name: str, *args, argtypes=None) -> int:
        slot = self.slots[name] if isinstance(name, str) else name
        proto = ctypes.CFUNCTYPE(HRESULT, c_void_p, *(argtypes or [type(a) if not isinstance(a, int) else c_uint64 for a in args]))
        return proto(self.vtbl[slot])(self.pointer, *args)

    def query(self, iid: GUID, slots: dict) -> "Interface | None":
        out = c_void_p()
        hr = ctypes.CFUNCTYPE(HRESULT, c_void_p, POINTER(GUID), POINTER(c_void_p))(self.vtbl[0])(
            self.pointer, byref(iid), byref(out))
        return Interface(out.value, slots) if hr == S_OK and out.value else None


# --- the heap, as ClrMD walks it ------------------------------------------------------------------------

class Oracle:
    def __init__(self, core_path: str, dac_path: str):
        self.core = Core(core_path)
        runtime = self.core.image_base("libcoreclr.so")
        if not runtime:
            raise SystemExit("no libcoreclr.so mapping in the core")
        self.dac = ctypes.CDLL(dac_path)
        # the DAC embeds a PAL that its DllMain initialises (ClrMD calls it the same way)
        main = self.dac.DllMain
        main.argtypes = [c_void_p, c_uint32, c_void_p]
        main.restype = c_int32
        main(self.dac._handle, 1, None)
        self.target = DataTarget(self.core, runtime)
        out = c_void_p()
        create = self.dac.CLRDataCreateInstance
        create.argtypes = [POINTER(GUID), c_void_p, POINTER(c_void_p)]
        create.restype = HRESULT
        hr = create(byref(IID_IXCLRDataProcess), ctypes.addressof(self.target.target), byref(out))
        if hr != S_OK:
            raise SystemExit(f"CLRDataCreateInstance failed: {hr & 0xFFFFFFFF:#x}")
        process = Interface(out.value, XCLR_PROCESS)
        self.process = process
        self.sos = process.query(IID_ISOSDacInterface, SOS)
        if self.sos is None:
            raise SystemExit("no ISOSDacInterface")
        self.sos8 = process.query(IID_ISOSDacInterface8, SOS8)
        self.sos6 = process.query(IID_ISOSDacInterface6, SOS6)
        self.sos14 = process.query(IID_ISOSDacInterface14, SOS14)
        self.sos13 = next(filter(None, (process.query(i, SOS13) for i in IID_ISOSDacInterface13)), None)
        self.ptr = self.core.pointer_size

    def _get(self, name, struct, *args):
        s = struct()
        hr = self.sos.call(name, *[c_uint64(a) for a in args], byref(s),
                           argtypes=[c_uint64] * len(args) + [c_void_p])
        return s if hr == S_OK else None

    def globals(self) -> CommonMethodTables:
        return self._get("GetUsefulGlobals", CommonMethodTables)

    def heaps(self) -> list:
        info = self._get("GetGCHeapData", GCInfo)
        if info is None:
            raise SystemExit("GetGCHeapData failed")
        out = []
        if info.ServerMode:
            arr = (CLRDATA_ADDRESS * info.HeapCount)()
            needed = c_uint32()
            self.sos.call("GetGCHeapList", c_uint32(info.HeapCount), arr, byref(needed),
                          argtypes=[c_uint32, c_void_p, c_void_p])
            for h in arr:
                d = self._get("GetGCHeapDetails", HeapDetails, h)
                out.append((h, d, self._generations(h, d)))
        else:
            d = self._get("GetGCHeapStaticData", HeapDetails)
            out.append((0, d, self._generations(0, d)))
        return out

    def _generations(self, heap: int, d: HeapDetails) -> list:
        gens = [(g.StartSegment, g.AllocContextPtr, g.AllocContextLimit) for g in d.GenerationTable]
        if self.sos8 is not None:
            n = c_uint32()
            if self.sos8.call("GetNumberGenerations", byref(n), argtypes=[c_void_p]) == S_OK and n.value:
                table = (GenerationData * n.value)()
                needed = c_uint32()
                if heap:
                    hr = self.sos8.call("GetGenerationTableSvr", c_uint64(heap), c_uint32(n.value), table,
                                        byref(needed), argtypes=[c_uint64, c_uint32, c_void_p, c_void_p])
                else:
                    hr = self.sos8.call("GetGenerationTable", c_uint32(n.value), table, byref(needed),
                                        argtypes=[c_uint32, c_void_p, c_void_p])
                if hr == S_OK:
                    gens = [(g.StartSegment, g.AllocContextPtr, g.AllocContextLimit) for g in table]
        return gens

    def segments(self) -> list:
        """(heap index, kind, address, start, end) of every segment or region, as ClrMD orders them."""
        out = []
        seen = {0}
        for index, (heap, d, gens) in enumerate(self.heaps()):
            regions = len(gens) >= 2 and gens[0][0] != gens[1][0]
            order = [3, 2] + ([1, 0] if regions else []) + ([4] if len(gens) > 4 else [])
            for g in order:
                address = gens[g][0]
                while address not in seen:
                    seen.add(address)
                    s = self._get("GetHeapSegmentData", SegmentData, address)
                    if s is None:
                        break
                    if s.Flags & 1:
                        kind = "frozen"
                    elif g == 3:
                        kind = "loh"
                    elif g == 4:
                        kind = "poh"
                    elif regions:
                        kind = f"gen{g}"
                    else:
                        kind = "ephemeral" if address == d.EphemeralHeapSegment else "gen2"
                    end = d.Allocated if address == d.EphemeralHeapSegment else s.Allocated
                    out.append({"heap": index, "kind": kind, "address": address, "start": s.Start, "end": end,
                                "committed": s.Committed, "reserved": s.Reserved, "flags": s.Flags})
                    if kind == "ephemeral":  # where generations 1 and 0 start in it (the segments GC)
                        out[-1]["generation_starts"] = [d.GenerationTable[1].AllocationStart,
                                                        d.GenerationTable[0].AllocationStart]
                    address = s.Next
        return out

    def allocation_contexts(self) -> dict:
        """ptr -> limit of every thread's allocation context and each heap's own (generation 0's)."""
        out = {}
        for _, d, gens in self.heaps():
            if gens[0][1] and gens[0][2]:
                out[gens[0][1]] = gens[0][2]
        store = self._get("GetThreadStoreData", ThreadStoreData)
        thread = store.FirstThread if store else 0
        seen = set()
        while thread and thread not in seen:
            seen.add(thread)
            t = self._get("GetThreadData", ThreadData, thread)
            if t is None:
                break
            if t.AllocContextPtr and t.AllocContextLimit:
                out[t.AllocContextPtr] = t.AllocContextLimit
            thread = t.NextThread
        return out

    def objects(self, segments: list) -> tuple[list, int]:
        """[address, method_table, size, segment index] of every object, and how many zero words were
        stepped over outside any allocation context."""
        contexts = self.allocation_contexts()
        min_obj = 3 * self.ptr
        out, stray = [], 0
        for si, seg in enumerate(segments):
            big = seg["kind"] in ("loh", "poh")
            align = 7 if big or self.ptr == 8 else 3
            obj, end = seg["start"], seg["end"]
            while obj < end:
                if seg["kind"] not in ("loh", "frozen"):
                    while obj in contexts:  # ClrMD's SkipAllocationContext
                        obj = contexts[obj] + ((min_obj + align) & ~align)
                    if obj >= end:
                        break
                data = self._get("GetObjectData", ObjectData, obj)
                if data is None or data.MethodTable == 0:
                    stray += 1
                    obj += self.ptr
                    continue
                out.append([obj, data.MethodTable, data.Size, si])
                obj += max((data.Size + align) & ~align, min_obj)
        return out, stray

    def _text(self, method: str, address: int) -> str | None:
        """A UTF-16 text an ISOSDacInterface call writes for an address (count, buffer, needed)."""
        buf = ctypes.create_string_buffer(2 * 4096)
        needed = c_uint32()
        hr = self.sos.call(method, c_uint64(address), c_uint32(4096), buf, byref(needed),
                           argtypes=[c_uint64, c_uint32, c_void_p, c_void_p])
        if hr != S_OK:
            return None
        n = max(0, min(needed.value, 4096))  # GetFrameName counts no terminator, the others do
        return buf.raw[: 2 * n].decode("utf-16-le", "surrogatepass").split("\0", 1)[0]

    def name(self, mt: int) -> str | None:
        return self._text("GetMethodTableName", mt)

    def method_name(self, md: int) -> str | None:
        """ISOSDacInterface::GetMethodDescName: the method as SOS prints it (Type.Method(args))."""
        return self._text("GetMethodDescName", md)

    def string(self, obj: int, length: int) -> str | None:
        count = length + 1
        buf = ctypes.create_string_buffer(2 * count)
        needed = c_uint32()
        hr = self.sos.call("GetObjectStringData", c_uint64(obj), c_uint32(count), buf, byref(needed),
                           argtypes=[c_uint64, c_uint32, c_void_p, c_void_p])
        return buf.raw[: 2 * length].hex() if hr == S_OK else None

    def method_table(self, mt: int) -> dict | None:
        d = self._get("GetMethodTableData", MethodTableData, mt)
        if d is None:
            return None
        return {"base_size": d.BaseSize, "component_size": d.ComponentSize, "parent": d.ParentMethodTable,
                "token": d.Token, "module": d.Module, "free": d.IsFree}

    def fields(self, mt: int) -> list | None:
        """The instance fields a MethodTable's own class declares (SOS's DisplayFields, one class)."""
        info = self._get("GetMethodTableFieldData", MethodTableFieldInfo, mt)
        if info is None:
            return None
        out = []
        address = info.FirstField
        parent = self.method_table(mt)
        inherited = 0
        if parent and parent["parent"]:
            p = self._get("GetMethodTableFieldData", MethodTableFieldInfo, parent["parent"])
            inherited = p.NumInstanceFields if p else 0
        own = info.NumInstanceFields - inherited + info.NumStaticFields
        seen = 0
        while address and seen < own:
            f = self._get("GetFieldDescData", FieldData, address)
            if f is None:
                break
            out.append({"token": f.FieldToken, "offset": f.Offset, "type": f.ElementType, "static": bool(f.IsStatic),
                        "thread_local": bool(f.IsThreadLocal), "field_mt": f.TypeMethodTable,
                        "enclosing": f.MTOfEnclosingClass})
            seen += 1
            address = f.NextField
        return out


    # --- the runtime's own memory: loader heaps and JIT code heaps, as ClrMD's EnumerateClrNativeHeaps ---

    def _traverse(self, heap: int, kind: int | None = None) -> list:
        """[address, size] of every block of a loader heap (``kind``: ISOSDacInterface13's LoaderHeapKind,
        0 normal, 1 explicit control; None: ISOSDacInterface's own TraverseLoaderHeap)."""
        blocks = []
        visit = VISITHEAP(lambda address, size, current: blocks.append([address, size]))
        if kind is None:
            hr = self.sos.call("TraverseLoaderHeap", c_uint64(heap), visit, argtypes=[c_uint64, VISITHEAP])
        else:
            hr = self.sos13.call("TraverseLoaderHeap", c_uint64(heap), c_int32(kind), visit,
                                 argtypes=[c_uint64, c_int32, VISITHEAP])
        return blocks if hr == S_OK else []

    def _domains(self) -> list:
        store = self._get("GetAppDomainStoreData", AppDomainStoreData)
        if store is None:
            return []
        domains = [d for d in (store.SystemDomain, store.SharedDomain) if d]  # the shared domain: before 3.0
        if store.DomainCount > 0:
            arr = (CLRDATA_ADDRESS * store.DomainCount)()
            needed = c_uint32()
            if self.sos.call("GetAppDomainList", c_uint32(store.DomainCount), arr, byref(needed),
                             argtypes=[c_uint32, c_void_p, c_void_p]) == S_OK:
                domains += [d for d in arr if d and d not in domains]
        return domains

    def native_heaps(self) -> list:
        """{"heap", "kind", "address", "size", "held" (the core holds its first byte)} of every block of the runtime's loader heaps (each domain's
        loader allocator: ISOSDacInterface13 on .NET 8+, else the domain's three heaps and its virtual-call
        stub heaps) and of the JIT's code heaps."""
        out = []

        def add(heap: int, kind: str, blocks: list) -> None:
            out.extend({"heap": heap, "kind": kind, "address": a, "size": n,
                        "held": bool(self.core._from_core(a, 1))} for a, n in blocks)

        names = []
        if self.sos13 is not None:
            count = c_int32()
            self.sos13.call("GetLoaderAllocatorHeapNames", c_int32(0), None, byref(count),
                            argtypes=[c_int32, c_void_p, c_void_p])
            if count.value > 0:
                arr = (ctypes.c_char_p * count.value)()
                if self.sos13.call("GetLoaderAllocatorHeapNames", c_int32(count.value), arr, byref(count),
                                   argtypes=[c_int32, c_void_p, c_void_p]) == S_OK:
                    names = [n.decode() for n in arr]
        for domain in self._domains():
            allocator = c_uint64()
            if names and self.sos13.call("GetDomainLoaderAllocator", c_uint64(domain), byref(allocator),
                                         argtypes=[c_uint64, c_void_p]) == S_OK and allocator.value:
                heaps = (CLRDATA_ADDRESS * len(names))()
                kinds = (c_int32 * len(names))()
                needed = c_int32()
                if self.sos13.call("GetLoaderAllocatorHeaps", c_uint64(allocator.value), c_int32(len(names)), heaps,
                                   kinds, byref(needed), argtypes=[c_uint64, c_int32, c_void_p, c_void_p, c_void_p]) == S_OK:
                    for name, heap, kind in zip(names, heaps, kinds):
                        if heap:
                            add(heap, name, self._traverse(heap, kind))
                continue
            d = self._get("GetAppDomainData", AppDomainData, domain)
            if d is None:
                continue
            for name in ("LowFrequencyHeap", "HighFrequencyHeap", "StubHeap"):
                heap = getattr(d, name)
                if heap:
                    add(heap, name, self._traverse(heap))
            for index, name in enumerate(STUB_HEAPS):
                blocks = []
                visit = VISITHEAP(lambda address, size, current: blocks.append([address, size]))
                if self.sos.call("TraverseVirtCallStubHeap", c_uint64(domain), c_int32(index), visit,
                                 argtypes=[c_uint64, c_int32, VISITHEAP]) == S_OK:
                    add(domain, name, blocks)
        count = c_int32()
        self.sos.call("GetJitManagerList", c_int32(0), None, byref(count), argtypes=[c_int32, c_void_p, c_void_p])
        managers = (JitManagerInfo * max(count.value, 0))()
        if count.value > 0 and self.sos.call("GetJitManagerList", c_int32(count.value), managers, byref(count),
                                             argtypes=[c_int32, c_void_p, c_void_p]) == S_OK:
            for m in managers:
                n = c_int32()
                self.sos.call("GetCodeHeapList", c_uint64(m.Address), c_int32(0), None, byref(n),
                              argtypes=[c_uint64, c_int32, c_void_p, c_void_p])
                if n.value <= 0:
                    continue
                heaps = (JitCodeHeapInfo * n.value)()
                if self.sos.call("GetCodeHeapList", c_uint64(m.Address), c_int32(n.value), heaps, byref(n),
                                 argtypes=[c_uint64, c_int32, c_void_p, c_void_p]) != S_OK:
                    continue
                for h in heaps:
                    if h.Kind == 0:  # an ExplicitControlLoaderHeap: no vtable, one pointer less than a LoaderHeap
                        blocks = self._traverse(h.Address, 1) if self.sos13 is not None else \
                            self._traverse(h.Address - self.ptr)
                        add(h.Address, "LoaderCodeHeap", blocks)
                    elif h.Kind == 1:
                        add(h.Address, "HostCodeHeap", [[h.Address, h.CurrentAddress - h.Address]])
        return out


    def gc_regions(self, method: str) -> list:
        """{"start", "size", "heap"} of ISOSDacInterface13's GC memory regions (.NET 8+; [] before)."""
        if self.sos13 is None:
            return []
        out = c_void_p()
        if self.sos13.call(method, byref(out), argtypes=[c_void_p]) != S_OK or not out.value:
            return []
        regions = Interface(out.value, MEMORY_ENUM)
        found = []
        while True:
            batch = (MemoryRegion * 64)()
            got = c_uint32()
            hr = regions.call("Next", c_uint32(64), batch, byref(got), argtypes=[c_uint32, c_void_p, c_void_p])
            found += [{"start": r.Start, "size": r.Size, "heap": r.Heap} for r in batch[: got.value]]
            if hr != S_OK or got.value < 64:
                return found


def handles(o: "Oracle") -> list:
    """{"handle", "type", "strong", "refcount", "secondary", "object"} of every handle ISOSDacInterface::
    GetHandleEnum lists (the object read from the handle's slot in the core)."""
    out = c_void_p()
    if o.sos.call("GetHandleEnum", byref(out), argtypes=[c_void_p]) != S_OK or not out.value:
        return []
    found = []
    handle_enum = Interface(out.value, HANDLE_ENUM)
    while True:
        batch = (SOSHandleData * 64)()
        got = c_uint32()
        hr = handle_enum.call("Next", c_uint32(64), batch, byref(got), argtypes=[c_uint32, c_void_p, c_void_p])
        for h in batch[: got.value]:
            word = o.core.read(h.Handle, o.ptr)
            found.append({"handle": h.Handle, "type": h.Type, "strong": bool(h.StrongReference),
                          "refcount": h.RefCount, "secondary": h.Secondary,
                          "object": int.from_bytes(word, "little") if word else None})
        if got.value < 64:  # Next answers S_FALSE even on a full batch: a short one ends it
            return found
        if hr not in (S_OK, 1):
            return found


class CollectibleData(ctypes.Structure):
    """DacpMethodTableCollectibleData (dacprivate.h): the allocator's object handle, then a BOOL."""

    _fields_ = [("LoaderAllocatorObjectHandle", c_uint64), ("Collectible", c_int32)]


def collectible(o: "Oracle", mts) -> dict:
    """MethodTable -> {"handle", "object"} for each of ``mts`` the DAC calls collectible
    (ISOSDacInterface6::GetMethodTableCollectibleData; the object read from the allocator's handle)."""
    out = {}
    for mt in mts:
        data = CollectibleData()
        if o.sos6 is None or o.sos6.call("GetMethodTableCollectibleData", c_uint64(mt), byref(data),
                                         argtypes=[c_uint64, c_void_p]) != S_OK or not data.Collectible:
            continue
        word = o.core.read(data.LoaderAllocatorObjectHandle, o.ptr) if data.LoaderAllocatorObjectHandle else None
        out[str(mt)] = {"handle": data.LoaderAllocatorObjectHandle,
                        "object": int.from_bytes(word, "little") if word else None}
    return out


def statics(o: "Oracle", mts) -> dict:
    """MethodTable -> {"gc", "nongc"}: the bases of its statics as the DAC gives them (.NET 9+:
    ISOSDacInterface14::GetStaticBaseAddress; before: the module's DomainLocalModule,
    GetDomainLocalModuleDataFromModule, as ClrMD reads a non-shared type's statics)."""
    out = {}
    for mt in mts:
        if o.sos14 is not None:
            nongc, gc = CLRDATA_ADDRESS(), CLRDATA_ADDRESS()
            if o.sos14.call("GetStaticBaseAddress", c_uint64(mt), byref(nongc), byref(gc),
                            argtypes=[c_uint64, c_void_p, c_void_p]) == S_OK:
                out[str(mt)] = {"gc": gc.value, "nongc": nongc.value}
            continue
        data = o.method_table(mt)
        if data is None or not data["module"]:
            continue
        dlm = o._get("GetDomainLocalModuleDataFromModule", DomainLocalModuleData, data["module"])
        if dlm is not None:
            out[str(mt)] = {"gc": dlm.GCStaticDataStart, "nongc": dlm.NonGCStaticDataStart}
    return out


def thread_statics(o: "Oracle", mts) -> dict:
    """Before .NET 9: {"module_index": {MethodTable: its module's index}, "blocks": [{"thread", "index", "gc",
    "nongc"}]}: each managed thread's ThreadLocalModule of each module of ``mts`` (GetModuleData's dwModuleIndex,
    then GetThreadLocalModuleData: pGCStaticDataStart is the data of that thread's object[] of the module's GC
    thread statics, 0 when it has none yet)."""
    index = {}
    for mt in mts:
        data = o.method_table(mt)
        module = o._get("GetModuleData", ModuleData, data["module"]) if data and data["module"] else None
        if module is not None:
            index[str(mt)] = module.ModuleIndex
    blocks = []
    for thread, t in _managed_threads(o):
        for i in sorted(set(index.values())):
            tlm = ThreadLocalModuleData()
            if o.sos.call("GetThreadLocalModuleData", c_uint64(thread), c_uint32(i), byref(tlm),
                          argtypes=[c_uint64, c_uint32, c_void_p]) == S_OK:
                blocks.append({"thread": t.OSThreadId, "index": i, "gc": tlm.GCStaticDataStart,
                               "nongc": tlm.NonGCStaticDataStart})
    return {"module_index": index, "blocks": blocks}


def _managed_threads(o: Oracle):
    """(address, ThreadData) of each thread of the runtime's thread store, in its order."""
    store = o._get("GetThreadStoreData", ThreadStoreData)
    thread, seen = (store.FirstThread if store else 0), set()
    while thread and thread not in seen:
        seen.add(thread)
        t = o._get("GetThreadData", ThreadData, thread)
        if t is None:
            break
        yield thread, t
        thread = t.NextThread


def stack_references(o: "Oracle") -> list:
    """{"thread", "address", "object", "flags"} of every stack reference ISOSDacInterface::GetStackReferences
    gives for each managed thread (precise: the JIT's GC info after unwinding from the core's registers)."""
    found = []
    for _, t in _managed_threads(o):
        out = c_void_p()
        if t.OSThreadId and o.sos.call("GetStackReferences", c_uint32(t.OSThreadId), byref(out),
                                      argtypes=[c_uint32, c_void_p]) == S_OK and out.value:
            refs = Interface(out.value, STACK_REF_ENUM)
            while True:
                batch = (SOSStackRefData * 64)()
                got = c_uint32()
                hr = refs.call("Next", c_uint32(64), batch, byref(got), argtypes=[c_uint32, c_void_p, c_void_p])
                found += [{"thread": t.OSThreadId, "address": r.Address, "object": r.Object, "flags": r.Flags,
                           "register": r.Register if r.HasRegisterInformation else None, "offset": r.Offset,
                           "source_type": r.SourceType, "source": r.Source, "sp": r.StackPointer}
                          for r in batch[: got.value]]
                if got.value < 64 or hr not in (S_OK, 1):
                    break
    return found


def stacks(o: "Oracle") -> list:
    """Each managed thread's stack as the DAC walks it (IXCLRDataTask::CreateStackWalk from the core's registers,
    as ClrMD and SOS's ``!clrstack`` do): per frame its IP and SP, the explicit Frame's address (0: a managed frame,
    its MethodDesc from GetMethodDescPtrFromIP) or the Frame's name (GetFrameName of its vtable or identifier) and
    MethodDesc (GetMethodDescPtrFromFrame), and the method's name (GetMethodDescName)."""
    out = []
    for thread, t in _managed_threads(o):
        frames: list = []
        entry = {"thread": thread, "os_id": t.OSThreadId, "frames": frames}
        out.append(entry)
        task = c_void_p()
        if not t.OSThreadId or o.process.call("GetTaskByOSThreadID", c_uint32(t.OSThreadId), byref(task),
                                              argtypes=[c_uint32, c_void_p]) != S_OK or not task.value:
            entry["error"] = "no task"
            continue
        walk = c_void_p()
        if Interface(task.value, XCLR_TASK).call("CreateStackWalk", c_uint32(STACK_WALK_ALL), byref(walk),
                                                 argtypes=[c_uint32, c_void_p]) != S_OK or not walk.value:
            entry["error"] = "no stack walk"
            continue
        w = Interface(walk.value, XCLR_STACK_WALK)
        for _ in range(10_000):
            ctx = ctypes.create_string_buffer(CONTEXT_AMD64_SIZE)
            size = c_uint32()
            if w.call("GetContext", c_uint32(CONTEXT_AMD64_FULL), c_uint32(CONTEXT_AMD64_SIZE), byref(size), ctx,
                      argtypes=[c_uint32, c_uint32, c_void_p, c_void_p]) != S_OK:
                entry["error"] = "no context"
                break
            ip = int.from_bytes(ctx.raw[CONTEXT_AMD64["Rip"]:CONTEXT_AMD64["Rip"] + 8], "little")
            sp = int.from_bytes(ctx.raw[CONTEXT_AMD64["Rsp"]:CONTEXT_AMD64["Rsp"] + 8], "little")
            frame = c_uint64(0)
            if w.call("Request", c_uint32(REQUEST_FRAME_DATA), c_uint32(0), None, c_uint32(8), byref(frame),
                      argtypes=[c_uint32, c_uint32, c_void_p, c_uint32, c_void_p]) != S_OK:
                frame.value = 0
            md = c_uint64(0)
            name = None
            if frame.value:
                ident = int.from_bytes(o.core.read(frame.value, 8), "little")
                name = o._text("GetFrameName", ident)
                if o.sos.call("GetMethodDescPtrFromFrame", c_uint64(frame.value), byref(md),
                              argtypes=[c_uint64, c_void_p]) != S_OK:
                    md.value = 0
            elif o.sos.call("GetMethodDescPtrFromIP", c_uint64(ip), byref(md), argtypes=[c_uint64, c_void_p]) != S_OK:
                md.value = 0
            frames.append({"ip": ip, "sp": sp, "frame": frame.value, "frame_name": name, "method_desc": md.value,
                           "method": o.method_name(md.value) if md.value else None})
            if w.call("Next") != S_OK:
                break
    return out


def threads(o: Oracle) -> dict:
    """The runtime's thread list as ISOSDacInterface::GetThreadStoreData / GetThreadData give it."""
    store = o._get("GetThreadStoreData", ThreadStoreData)
    out = [{"address": thread, "managed_id": t.ManagedThreadId, "os_id": t.OSThreadId, "state": t.State,
            "preemptive_gc_disabled": t.PreemptiveGCDisabled, "frame": t.Frame, "lock_count": t.LockCount,
            "last_thrown_handle": t.LastThrownObjectHandle} for thread, t in _managed_threads(o)]
    return {"threads": out, "count": store.ThreadCount if store else None,
            "background": store.BackgroundThreadCount if store else None,
            "finalizer": store.FinalizerThread if store else None, "gc": store.GCThread if store else None}


def main(argv) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("core")
    ap.add_argument("dac")
    ap.add_argument("--names", action="store_true")
    ap.add_argument("--strings", action="store_true")
    ap.add_argument("--fields", action="store_true")
    ap.add_argument("--native-heaps", action="store_true")
    ap.add_argument("--handles", action="store_true")
    ap.add_argument("--stack-refs", action="store_true")
    ap.add_argument("--collectible", action="store_true")
    ap.add_argument("--statics", default=None, help="comma list of MethodTables: their statics' bases")
    ap.add_argument("--threads", action="store_true")
    ap.add_argument("--stacks", action="store_true", help="each managed thread's frames as the DAC walks them")
    ap.add_argument("--thread-statics", default=None, help="comma list of MethodTables: their modules' thread "
                    "statics on every thread (before .NET 9)")
    ap.add_argument("--method-names", default=None, help="comma list of MethodDescs: their names")
    args = ap.parse_args(argv)
    o = Oracle(args.core, args.dac)
    g = o.globals()
    segments = o.segments()
    objects, stray = o.objects(segments)
    result = {"string_method_table": g.StringMethodTable, "free_method_table": g.FreeMethodTable,
              "object_method_table": g.ObjectMethodTable, "exception_method_table": g.ExceptionMethodTable,
              "segments": segments, "objects": objects,
              "allocation_contexts": sorted(o.allocation_contexts().items()), "stray_words": stray}
    mts = sorted({mt for _, mt, _, _ in objects})
    if args.names:
        result["names"] = {str(mt): o.name(mt) for mt in mts}
        result["method_tables"] = {str(mt): o.method_table(mt) for mt in mts}
    if args.strings:
        base = o.method_table(g.StringMethodTable)["base_size"]  # the DAC gives BaseSize - 2 for strings
        result["strings"] = {str(a): o.string(a, (size - base - 2) // 2) for a, mt, size, _ in objects
                             if mt == g.StringMethodTable}
    if args.fields:
        # not the free MethodTable's: it has no EEClass, and the DAC (this one, hosted so) dies on it
        result["fields"] = {str(mt): o.fields(mt) for mt in mts if mt != g.FreeMethodTable}
    if args.native_heaps:
        result["native_heaps"] = o.native_heaps()
        result["gc_bookkeeping"] = o.gc_regions("GetGCBookkeepingMemoryRegions")
        result["handle_tables"] = o.gc_regions("GetHandleTableMemoryRegions")
    if args.handles:
        result["handles"] = handles(o)
    if args.stack_refs:
        result["stack_refs"] = stack_references(o)
    if args.collectible:
        result["collectible"] = collectible(o, [mt for mt in mts if mt != g.FreeMethodTable])
    if args.statics:
        result["statics"] = statics(o, [int(m, 0) for m in args.statics.split(",")])
    if args.threads:
        result["threads"] = threads(o)
    if args.stacks:
        result["stacks"] = stacks(o)
    if args.thread_statics:
        result["thread_statics"] = thread_statics(o, [int(m, 0) for m in args.thread_statics.split(",")])
    if args.method_names:
        result["method_names"] = {m: o.method_name(int(m, 0)) for m in args.method_names.split(",")}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0)  # the DAC's PAL registers thread-exit handlers that outlive an orderly shutdown


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

// Writes a Windows minidump of another process with dbghelp!MiniDumpWriteDump (run under Wine by
// sample_dumps/make_dumps.py; it must have the bitness of the process it dumps).
//   usage: minidumper PID OUT.dmp [TYPE] [--memory-info]      TYPE defaults to 2 (MiniDumpWithFullMemory)
//
// A process dumping itself gets a dump three times larger and no context for the calling thread, hence a
// second process.  Wine ignores smaller dump types (no GC heap in them), and MiniDumpWithFullMemoryInfo
// (0x800): with --memory-info the MemoryInfoListStream is written here instead, as dbghelp does on Windows:
// every region of the process's address space from VirtualQueryEx (free, reserved and committed; image,
// mapped and private), passed to MiniDumpWriteDump as a user stream of that type.
using System;
using System.IO;
using System.Runtime.InteropServices;

static class Program
{
    const uint PROCESS_QUERY_INFORMATION = 0x0400, PROCESS_VM_READ = 0x0010, PROCESS_DUP_HANDLE = 0x0040;

    [DllImport("kernel32.dll", SetLastError = true)]
    static extern IntPtr OpenProcess(uint access, bool inherit, uint pid);

    [DllImport("kernel32.dll", SetLastError = true)]
    static extern bool CloseHandle(IntPtr handle);

    [DllImport("dbghelp.dll", SetLastError = true)]
    static extern bool MiniDumpWriteDump(IntPtr process, uint pid, IntPtr file, uint type,
                                         IntPtr exceptionParam, IntPtr userStreamParam, IntPtr callbackParam);

    // MEMORY_BASIC_INFORMATION with pointer-sized members: 28 bytes in a 32-bit process, 48 in a 64-bit one
    [StructLayout(LayoutKind.Sequential)]
    struct MemoryBasicInformation
    {
        public IntPtr BaseAddress, AllocationBase;
        public uint AllocationProtect;
        public IntPtr RegionSize;
        public uint State, Protect, Type;
    }

    [DllImport("kernel32.dll", SetLastError = true)]
    static extern IntPtr VirtualQueryEx(IntPtr process, IntPtr address, out MemoryBasicInformation info, IntPtr length);

    const int MemoryInfoListStream = 16, MemoryInfoSize = 48, MaxRegions = 1 << 20;

    // MINIDUMP_MEMORY_INFO_LIST: {SizeOfHeader 16, SizeOfEntry 48, NumberOfEntries (8 bytes)}, then per region
    // {BaseAddress, AllocationBase, AllocationProtect, pad, RegionSize, State, Protect, Type, pad}
    static byte[] MemoryInfoList(IntPtr process)
    {
        var entries = new MemoryStream();
        var w = new BinaryWriter(entries);
        long count = 0;
        ulong address = 0;
        int size = Marshal.SizeOf(typeof(MemoryBasicInformation));
        MemoryBasicInformation info;
        while (count < MaxRegions && VirtualQueryEx(process, new IntPtr((long)address), out info, new IntPtr(size)) != IntPtr.Zero)
        {
            ulong regionSize = (ulong)info.RegionSize.ToInt64() & (IntPtr.Size == 4 ? 0xFFFFFFFFUL : ulong.MaxValue);
            ulong baseAddress = (ulong)info.BaseAddress.ToInt64() & (IntPtr.Size == 4 ? 0xFFFFFFFFUL : ulong.MaxValue);
            if (regionSize == 0)
                break;
            w.Write(baseAddress);
            w.Write((ulong)info.AllocationBase.ToInt64() & (IntPtr.Size == 4 ? 0xFFFFFFFFUL : ulong.MaxValue));
            w.Write(info.AllocationProtect);
            w.Write(0u);
            w.Write(regionSize);
            w.Write(info.State);
            w.Write(info.Protect);
            w.Write(info.Type);
            w.Write(0u);
            count++;
            ulong next = baseAddress + regionSize;
            if (next <= address)
                break;
            address = next;
        }
        var stream = new MemoryStream();
        var h = new BinaryWriter(stream);
        h.Write(16u);
        h.Write((uint)MemoryInfoSize);
        h.Write((ulong)count);
        h.Write(entries.ToArray());
        return stream.ToArray();
    }

    // MINIDUMP_USER_STREAM_INFORMATION {ULONG count; pointer to MINIDUMP_USER_STREAM {ULONG32 type; ULONG size;
    // PVOID buffer}}, packed to 4 bytes as dbghelp.h declares them (pshpack4.h): the pointer at offset 4
    static IntPtr UserStreams(byte[] data, int type)
    {
        IntPtr buffer = Marshal.AllocHGlobal(data.Length);
        Marshal.Copy(data, 0, buffer, data.Length);
        IntPtr stream = Marshal.AllocHGlobal(8 + IntPtr.Size);
        Marshal.WriteInt32(stream, 0, type);
        Marshal.WriteInt32(stream, 4, data.Length);
        Marshal.WriteIntPtr(stream, 8, buffer);
        IntPtr information = Marshal.AllocHGlobal(4 + IntPtr.Size);
        Marshal.WriteInt32(information, 0, 1);
        Marshal.WriteIntPtr(information, 4, stream);
        return information;
    }

    static int Main(string[] args)
    {
        uint pid = uint.Parse(args[0]);
        uint type = args.Length > 2 && args[2] != "--memory-info" ? uint.Parse(args[2]) : 2;
        bool memoryInfo = Array.IndexOf(args, "--memory-info") >= 2;
        IntPtr process = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ | PROCESS_DUP_HANDLE, false, pid);
        if (process == IntPtr.Zero)
        {
            Console.Error.WriteLine("OpenProcess failed: " + Marshal.GetLastWin32Error());
            return 1;
        }
        IntPtr userStreams = memoryInfo ? UserStreams(MemoryInfoList(process), MemoryInfoListStream) : IntPtr.Zero;
        using (var stream = new FileStream(args[1], FileMode.Create, FileAccess.ReadWrite))
        {
            bool ok = MiniDumpWriteDump(process, pid, stream.SafeFileHandle.DangerousGetHandle(), type,
                                        IntPtr.Zero, userStreams, IntPtr.Zero);
            if (!ok)
            {
                Console.Error.WriteLine("MiniDumpWriteDump failed: " + Marshal.GetLastWin32Error());
                return 1;
            }
        }
        CloseHandle(process);
        Console.WriteLine("written " + args[1]);
        return 0;
    }
}

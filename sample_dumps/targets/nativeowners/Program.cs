// The native-owners target of clrlayout's tests (issue 48): native blocks from Marshal.AllocHGlobal (glibc's malloc
// on Linux) held by managed objects every way .NET code holds them — an IntPtr field, a UIntPtr field, a pointer
// field, an IntPtr inside a struct field, a SafeHandle's handle, the elements of an IntPtr[], a boxed IntPtr, a
// pointer into the middle of a block — and blocks held only by dead objects (unreferenced, not yet collected) or by
// nothing at all (leaked).  It writes each block to its truth file with malloc_usable_size and the object that
// holds it, says READY and waits: "measure" on its standard input prints what glibc says at that moment
// (MALLINFO and mallinfo2()'s ten fields: a test measures, dumps and measures again), anything else ends it.  Blocks
// are filled with bytes that are no pointer; on .NET 6+ some come from NativeMemory.Alloc (found by reflection:
// this code compiles against Mono's libraries, which lack it).
#pragma warning disable 0219, 0414
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;

unsafe class Holder
{
    public IntPtr Handle;
    public UIntPtr Unsigned;
    public void* Raw;
    public long Number;
}

struct Wrapped
{
    public int Tag;
    public IntPtr Inner;
}

class StructHolder
{
    public Wrapped W;
}

sealed class BlockHandle : SafeHandle
{
    public BlockHandle(IntPtr block) : base(IntPtr.Zero, true)
    {
        SetHandle(block);
    }

    public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

    protected override bool ReleaseHandle()
    {
        Marshal.FreeHGlobal(handle);
        return true;
    }
}

static class Program
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Raise(string message)
    {
        throw new InvalidOperationException(message);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Through(int depth)
    {
        if (depth > 1)
            Through(depth - 1);
        else
            Raise("nativeowners: in flight");
    }

    [DllImport("libc.so.6", EntryPoint = "malloc_usable_size")]
    static extern UIntPtr UsableSize(IntPtr block);

    [StructLayout(LayoutKind.Sequential)]
    struct MallInfo2
    {
        public UIntPtr Arena, Ordblks, Smblks, Hblks, Hblkhd, Usmblks, Fsmblks, Uordblks, Fordblks, Keepcost;
    }

    [DllImport("libc.so.6", EntryPoint = "mallinfo2")]
    static extern MallInfo2 MallInfo();

    static string Measure()
    {
        MallInfo2 m = MallInfo();
        return "MALLINFO " + m.Arena + " " + m.Ordblks + " " + m.Smblks + " " + m.Hblks + " " + m.Hblkhd + " " +
               m.Usmblks + " " + m.Fsmblks + " " + m.Uordblks + " " + m.Fordblks + " " + m.Keepcost;
    }

    // NativeMemory.Alloc (.NET 6+), or IntPtr.Zero where the runtime has none
    static unsafe IntPtr NativeAlloc(int size)
    {
        Type t = Type.GetType("System.Runtime.InteropServices.NativeMemory");
        if (t == null)
            return IntPtr.Zero;
        var alloc = t.GetMethod("Alloc", new[] { typeof(UIntPtr) });
        object ptr = alloc.Invoke(null, new object[] { (UIntPtr)(uint)size });
        IntPtr p = (IntPtr)System.Reflection.Pointer.Unbox(ptr);
        for (int i = 0; i < size; i++)
            Marshal.WriteByte(p, i, 0x5A);
        return p;
    }

    static readonly List<object> Keep = new List<object>();

    static unsafe long AddressOf(object o)
    {
        TypedReference tr = __makeref(o);
        return (long)**(IntPtr**)(&tr);
    }

    static IntPtr Block(int size)
    {
        IntPtr p = Marshal.AllocHGlobal(size);
        for (int i = 0; i < size; i++)
            Marshal.WriteByte(p, i, 0x5A);
        return p;
    }

    // what each block is, for the truth file; the holder's address is read once every object is made (after which
    // nothing is allocated that could make the GC move them)
    static readonly List<object[]> Made = new List<object[]>();

    static void Record(IntPtr block, object holder, string how)
    {
        Made.Add(new object[] { (long)block, (long)UsableSize(block), holder, how });
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeLeaked(int size)
    {
        IntPtr p = Block(size);
        Record(p, null, "leaked");
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static unsafe void MakeDead(int size)
    {
        var h = new Holder { Handle = Block(size), Number = 42 };
        Record(h.Handle, h, "dead");  // the ledger holds it until its text is made: dead by the time of the dump
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static unsafe void MakeLive()
    {
        for (int i = 0; i < 20; i++)
        {
            var h = new Holder { Handle = Block(100 + i), Unsigned = (UIntPtr)(ulong)(long)Block(200 + i),
                                 Raw = (void*)Block(300 + i), Number = 7 };
            Keep.Add(h);
            Record(h.Handle, h, "field");
            Record((IntPtr)(long)(ulong)h.Unsigned, h, "uintptr");
            Record((IntPtr)h.Raw, h, "pointer");
        }
        var big = new Holder { Handle = Block(400000) };  // an mmapped chunk
        Keep.Add(big);
        Record(big.Handle, big, "field");
        for (int i = 0; i < 5; i++)
        {
            var s = new StructHolder { W = new Wrapped { Tag = i, Inner = Block(64 + i) } };
            Keep.Add(s);
            Record(s.W.Inner, s, "struct");
        }
        for (int i = 0; i < 5; i++)
        {
            var handle = new BlockHandle(Block(500 + i));
            Keep.Add(handle);
            Record(handle.DangerousGetHandle(), handle, "safehandle");
        }
        var array = new IntPtr[10];
        for (int i = 0; i < array.Length; i++)
        {
            array[i] = Block(40 + 8 * i);
            Record(array[i], array, "array");
        }
        Keep.Add(array);
        for (int i = 0; i < 5; i++)
        {
            IntPtr p = Block(77 + i);
            object box = p;
            Keep.Add(box);
            Record(p, box, "boxed");
        }
        for (int i = 0; i < 5; i++)
        {
            IntPtr p = Block(256);
            var inner = new Holder { Handle = p + 100 };
            Keep.Add(inner);
            Record(p, inner, "interior");
        }
        for (int i = 0; i < 5; i++)
        {
            IntPtr p = NativeAlloc(150 + i);
            if (p == IntPtr.Zero)
                break;
            var h = new Holder { Handle = p };
            Keep.Add(h);
            Record(p, h, "nativememory");
        }
    }

    // the stack below this frame zeroed: a slot a later frame leaves unwritten must not keep a leaked block's
    // address from the frames that made it (the leak search reads live stacks conservatively)
    [MethodImpl(MethodImplOptions.NoInlining)]
    static unsafe int Scrub()
    {
        byte* scratch = stackalloc byte[64 * 1024];
        for (int i = 0; i < 64 * 1024; i++)
            scratch[i] = 0;
        return scratch[100];
    }

    // the truth file's text, made in a frame of its own: Main's frame never holds a block's address
    [MethodImpl(MethodImplOptions.NoInlining)]
    static string TruthText()
    {
        var sb = new StringBuilder();
        sb.Append("{\"runtime\": \"").Append(Environment.Version).Append("\", \"blocks\": [");
        for (int i = 0; i < Made.Count; i++)
        {
            object[] m = Made[i];
            long holder = m[2] == null ? 0 : AddressOf(m[2]);
            sb.Append(i == 0 ? "" : ", ").Append("{\"block\": ").Append((long)m[0]).Append(", \"usable\": ")
              .Append((long)m[1]).Append(", \"holder\": ").Append(holder).Append(", \"how\": \"")
              .Append((string)m[3]).Append("\"}");
        }
        sb.Append("]}");
        // the ledger no longer holds a leaked or dead block's address, nor a holder: only the truth file does
        for (int i = 0; i < Made.Count; i++)
            Made[i] = null;
        return sb.ToString();
    }

    static void Main(string[] args)
    {
        string truth = args[0];
        GC.Collect();
        MakeLive();
        // on a thread of their own, so in an arena of their own: memory the runtime never used, which no stale
        // pointer of the runtime's own blocks (left in memory it allocated and did not clear) can point into
        // The thread stays (waiting): the stack of a thread that ended is kept by glibc for the next thread, with
        // what it held, and is no thread's stack the search can tell from other memory
        var made = new System.Threading.ManualResetEvent(false);
        var apart = new System.Threading.Thread(() =>
        {
            for (int i = 0; i < 10; i++)
                MakeDead(120 + i);
            for (int i = 0; i < 10; i++)
                MakeLeaked(90 + 16 * i);
            Scrub();
            made.Set();
            System.Threading.Thread.Sleep(System.Threading.Timeout.Infinite);
        });
        apart.IsBackground = true;
        apart.Name = "native-leaker";
        apart.Start();
        made.WaitOne();
        File.WriteAllText(truth, TruthText());
        string ready = "READY " + Process.GetCurrentProcess().Id;
        Scrub();
        Console.WriteLine(ready);
        Scrub();
        Measure();  // once before it counts: the P/Invoke's own first-call setup allocates
        try
        {
            Through(3);  // three frames deep: the stack trace names each (clrlayout pe)
        }
        catch (InvalidOperationException)
        {
            // waiting inside the catch: the exception is the main thread's in flight (clrlayout threads)
            while (Console.ReadLine() == "measure")
                Console.WriteLine(Measure());
        }
        GC.KeepAlive(Keep);
    }
}

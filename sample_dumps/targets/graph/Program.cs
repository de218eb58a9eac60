// The graph target: builds object graphs whose reachability and retained sizes are known by construction
// (a chain, a cycle, a shared subtree, a cache that leaks, an object held only by a dependent handle, objects
// held only by the finalization queue, one held only by a thread's stack, objects no one holds, the
// LoaderAllocator of a collectible assembly that only an object of one of its types keeps alive), then writes
// what it built to a JSON "truth" file (addresses, which root kinds keep each alive, retained counts and
// bytes from the MethodTables' sizes), prints "READY <pid>" and waits on stdin while it is dumped.
//
//   mcs -unsafe -target:exe -out:graph.dll Program.cs ../common/TargetRuntime.cs

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

public class Node { public Node Next; public byte[] Payload; }
public class Holder { public object Child; }
public class Key { public int Id; }
public class Value { public byte[] Data; }
public struct LeakPayload { public long A; public object B; }
public class LeakItem { public LeakPayload[] Payload; public string Token; }

public class Finalized
{
    public static readonly ManualResetEvent Gate = new ManualResetEvent(false);
    public static int Running = -1;
    public int Id;
    public byte[] Data;
    ~Finalized() { Running = Id; Gate.WaitOne(); }
}

public static class Graph
{
    public static Node Chain;
    public static Node[] Cycle;
    public static Holder[] Shared;
    public static Dictionary<string, List<byte[]>> Cache;
    public static Key DependentKey;
    public static List<LeakItem> Leaks = new List<LeakItem>();
    public static object CollectibleHeld;
    public static ConditionalWeakTable<Key, Value> Table = new ConditionalWeakTable<Key, Value>();
    static readonly ManualResetEvent StackGate = new ManualResetEvent(false);
    static long stackHeld;
    static readonly ManualResetEvent StackReady = new ManualResetEvent(false);

    static unsafe long AddressOf(object o)
    {
        TypedReference tr = __makeref(o);
        return (long)**(IntPtr**)(&tr);
    }

    // the bytes an object takes on the heap: BaseSize (+ components) from its MethodTable, aligned to 8
    static long Aligned(object o)
    {
        IntPtr mt = Marshal.ReadIntPtr(new IntPtr(AddressOf(o)));
        long size = Marshal.ReadInt32(mt, 4);
        Array a = o as Array;
        if (a != null) size += (long)a.Length * (Marshal.ReadInt32(mt) & 0xFFFF);
        long min = 3 * IntPtr.Size;
        size = (size + 7) & ~7L;
        return size < min ? min : size;
    }

    static void Build()
    {
        Node head = null;
        for (int i = 0; i < 200; i++) head = new Node { Next = head, Payload = new byte[32] };
        Chain = head;
        Cycle = new Node[3];
        for (int i = 0; i < 3; i++) Cycle[i] = new Node();
        for (int i = 0; i < 3; i++) Cycle[i].Next = Cycle[(i + 1) % 3];
        var shared = new Holder();
        var kids = new object[10];
        for (int i = 0; i < 10; i++) kids[i] = new Holder();
        shared.Child = kids;
        Shared = new Holder[] { new Holder { Child = shared }, new Holder { Child = shared } };
        Cache = new Dictionary<string, List<byte[]>>();
        for (int i = 0; i < 50; i++)
        {
            var list = new List<byte[]>();
            for (int k = 0; k < 4; k++) list.Add(new byte[256]);
            Cache["session-" + i] = list;
        }
        DependentKey = new Key { Id = 7 };
        Table.Add(DependentKey, new Value { Data = new byte[64] });
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static List<long> MakeFinalized()
    {
        var addresses = new List<long>();
        var made = new List<Finalized>();
        for (int i = 0; i < 8; i++) made.Add(new Finalized { Id = i, Data = new byte[48] });
        GC.Collect(); GC.Collect();  // promoted and compacted now: their addresses hold from here
        foreach (var f in made) addresses.Add(AddressOf(f));
        return addresses;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static List<long> MakeDead()
    {
        var addresses = new List<long>();
        for (int i = 0; i < 5; i++) addresses.Add(AddressOf(new Holder { Child = new byte[40] }));
        return addresses;
    }

    // an object of a type of a collectible assembly (AssemblyBuilderAccess.RunAndCollect): nothing but the GC's
    // object -> LoaderAllocator edge keeps the assembly's LoaderAllocator object alive (its native side holds
    // it by a weak handle); the assembly builder, its type and the type's RuntimeType are dropped here
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeCollectible()
    {
        var asm = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("Collectible"), AssemblyBuilderAccess.RunAndCollect);
        ModuleBuilder module = asm.DefineDynamicModule("Collectible");
        TypeBuilder type = module.DefineType("Collectible.Held", TypeAttributes.Public | TypeAttributes.Class);
        type.DefineField("Data", typeof(byte[]), FieldAttributes.Public);
        CollectibleHeld = Activator.CreateInstance(type.CreateType());
    }

    // the LoaderAllocator object of the collectible type: what its RuntimeType keeps in m_keepalive (0: none)
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long CollectibleAllocator()
    {
        Type t = CollectibleHeld.GetType();
        FieldInfo f = t.GetType().GetField("m_keepalive", BindingFlags.NonPublic | BindingFlags.Instance);
        object allocator = f == null ? null : f.GetValue(t);
        return allocator == null ? 0 : AddressOf(allocator);
    }

    static void HoldOnStack()
    {
        var local = new Holder { Child = new byte[24] };
        Interlocked.Exchange(ref stackHeld, AddressOf(local));
        StackReady.Set();
        StackGate.WaitOne();
        GC.KeepAlive(local);
    }

    static string Item(string name, long address, string live, long count, long bytes)
    {
        return string.Format("    {{\"name\": \"{0}\", \"address\": \"0x{1:x}\", \"live\": {2}, \"retained_count\": {3}, " +
                             "\"retained_bytes\": {4}}}", name, address, live, count, bytes);
    }

    internal static void Main(string[] args)
    {
        string truthPath = args.Length > 0 ? args[0] : "truth.json";
        Build();
        MakeCollectible();
        List<long> finalized = MakeFinalized();
        // sweep only from here, so that nothing moves: every Finalized is now ready for finalization, the first
        // finalizer run blocks the finalizer thread, the others stay in the queue (f-reachable)
        GC.Collect(2, GCCollectionMode.Forced, true, false);
        GC.Collect(2, GCCollectionMode.Forced, true, false);
        Thread.Sleep(200);
        var holder = new Thread(HoldOnStack);
        holder.IsBackground = true;
        holder.Start();
        StackReady.WaitOne();
        List<long> dead = MakeDead();

        // expected retained sizes under the handles and the finalization queue (the stacks' words may root more),
        // from the MethodTables' sizes
        long chainBytes = 0;
        for (Node n = Chain; n != null; n = n.Next) chainBytes += Aligned(n) + Aligned(n.Payload);
        object sharedTree = Shared[0].Child;
        long sharedBytes = Aligned(Shared) + Aligned(Shared[0]) + Aligned(Shared[1]) + Aligned(sharedTree) +
                           Aligned(((Holder)sharedTree).Child);
        foreach (object k in (object[])((Holder)sharedTree).Child) sharedBytes += Aligned(k);
        Value dependentValue;
        Table.TryGetValue(DependentKey, out dependentValue);

        var items = new List<string>();
        // "live": whether the object is reachable with these sets of root kinds (null: not known here)
        string always = "{\"handles,finalizer,stacks\": true, \"handles\": true, \"handles,finalizer\": true}";
        items.Add(Item("chain", AddressOf(Chain), always, 400, chainBytes));
        items.Add(Item("cycle", AddressOf(Cycle[1]), always, 1, Aligned(Cycle[1])));
        items.Add(Item("shared_array", AddressOf(Shared), always, 15, sharedBytes));
        items.Add(Item("shared_holder", AddressOf(Shared[0]), always, 1, Aligned(Shared[0])));
        items.Add(Item("cache", AddressOf(Cache), always, -1, -1));
        items.Add(Item("dependent_value", AddressOf(dependentValue), always, 2, Aligned(dependentValue) +
                       Aligned(dependentValue.Data)));
        long allocator = CollectibleAllocator();
        if (allocator != 0)
            items.Add(Item("collectible_allocator", allocator, always, -1, -1));
        int running = Finalized.Running;
        for (int i = 0; i < finalized.Count; i++)
        {
            if (i == running) continue;  // on the finalizer thread's stack, not in the queue
            items.Add(Item("finalizable" + i, finalized[i],
                           "{\"handles,finalizer,stacks\": true, \"handles\": false, \"handles,finalizer\": true}", -1, -1));
        }
        items.Add(Item("stack_local", Interlocked.Read(ref stackHeld),
                       "{\"handles,finalizer,stacks\": true, \"handles\": false, \"handles,finalizer\": false}", -1, -1));
        for (int i = 0; i < dead.Count; i++)
            // with the stacks, a stale word of a frame may still point at it (a conservative scan's answer)
            items.Add(Item("dead" + i, dead[i],
                           "{\"handles,finalizer,stacks\": null, \"handles\": false, \"handles,finalizer\": false}", 0, 0));
        var truth = new StreamWriter(truthPath, false, new UTF8Encoding(false));
        truth.Write("{\n");
        truth.Write("  \"runtime_version\": \"" + TargetRuntime.Version() + "\",\n");
        truth.Write("  \"pid\": " + Process.GetCurrentProcess().Id + ",\n");
        truth.Write("  \"pointer_size\": " + IntPtr.Size + ",\n");
        truth.Write("  \"finalizer_running\": " + running + ",\n");
        truth.Write("  \"objects\": [\n" + string.Join(",\n", items.ToArray()) + "\n  ]\n}\n");
        truth.Close();
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        // "grow N": N more LeakItems (each with a LeakPayload[16] and a new "session-token" string) held by a
        // static list, what they take written to <truth>.<step>, and READY again: a leak between two dumps
        string line;
        int step = 0;
        while ((line = Console.ReadLine()) != null && line.StartsWith("grow "))
        {
            int n = int.Parse(line.Substring(5));
            long bytes = 0;
            for (int i = 0; i < n; i++)
            {
                var item = new LeakItem { Payload = new LeakPayload[16], Token = new string('s', 1) + "ession-token" };
                Leaks.Add(item);
                bytes += Aligned(item) + Aligned(item.Payload);
            }
            step++;
            File.WriteAllText(truthPath + "." + step, "{\"leaked\": " + n + ", \"leaked_bytes\": " + bytes +
                              ", \"token\": \"session-token\", \"held\": " + Leaks.Count + "}\n");
            Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        }
        StackGate.Set();
        Finalized.Gate.Set();  // the finalizer thread runs on, and the process ends at once
        GC.KeepAlive(Chain);
        Environment.Exit(0);
    }
}

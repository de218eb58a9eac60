""".NET helpers compiled at run time from expression trees (no C# compiler needed).

pythonnet turns every System.String it returns into a Python str, and a str handed back to .NET becomes a
new object, so Python cannot hold a particular string.  These helpers create, pin, lock and hash strings
inside .NET and give Python only GCHandle pointers (IntPtr).
"""

from __future__ import annotations

import clr
import System
from System import Array, Buffer, Byte, Char, IntPtr, Object, String, Type
from System.Linq.Expressions import Expression, ParameterExpression
from System.Runtime.CompilerServices import RuntimeHelpers
from System.Runtime.InteropServices import GCHandle, GCHandleType
from System.Threading import Monitor


def _t(x):
    return clr.GetClrType(x)


class DotNet:
    def __init__(self):
        string_t, object_t, intptr_t = _t(String), _t(Object), _t(IntPtr)
        chars_t = _t(Array[Char])
        new_string = string_t.GetConstructor(Array[Type]([chars_t]))
        alloc = _t(GCHandle).GetMethod("Alloc", Array[Type]([object_t, _t(GCHandleType)]))
        to_ptr = _t(GCHandle).GetMethod("ToIntPtr")
        from_ptr = _t(GCHandle).GetMethod("FromIntPtr")

        def pin(e):
            return Expression.Call(to_ptr, Expression.Call(alloc, Expression.Convert(e, object_t),
                                                           Expression.Constant(GCHandleType.Pinned)))

        # (char[] a, char[] b) -> IntPtr[2]: two strings allocated back to back, then both pinned
        a, b = Expression.Parameter(chars_t, "a"), Expression.Parameter(chars_t, "b")
        s1, s2 = Expression.Variable(string_t, "s1"), Expression.Variable(string_t, "s2")
        body = Expression.Block(_t(Array[IntPtr]), Array[ParameterExpression]([s1, s2]), Array[Expression]([
            Expression.Assign(s1, Expression.New(new_string, a)),
            Expression.Assign(s2, Expression.New(new_string, b)),
            Expression.NewArrayInit(intptr_t, Array[Expression]([pin(s1), pin(s2)]))]))
        self._pair = Expression.Lambda[System.Func[Array[Char], Array[Char], Array[IntPtr]]](
            body, Array[ParameterExpression]([a, b])).Compile()

        # () -> IntPtr: String.Empty pinned
        self._empty = Expression.Lambda[System.Func[IntPtr]](
            pin(Expression.Field(None, string_t.GetField("Empty")))).Compile()

        # (char[]) -> IntPtr: String.Intern(new string(chars)) pinned
        c = Expression.Parameter(chars_t, "c")
        intern = string_t.GetMethod("Intern", Array[Type]([string_t]))
        self._intern = Expression.Lambda[System.Func[Array[Char], IntPtr]](
            pin(Expression.Call(intern, Expression.New(new_string, c))), Array[ParameterExpression]([c])).Compile()

        # (IntPtr handle) -> Monitor.Enter / Monitor.Exit / RuntimeHelpers.GetHashCode on its target
        h = Expression.Parameter(intptr_t, "h")
        target = Expression.Property(Expression.Call(from_ptr, h), "Target")
        hp = Array[ParameterExpression]([h])
        enter = _t(Monitor).GetMethod("Enter", Array[Type]([object_t]))
        leave = _t(Monitor).GetMethod("Exit", Array[Type]([object_t]))
        hash_code = _t(RuntimeHelpers).GetMethod("GetHashCode", Array[Type]([object_t]))
        self._enter = Expression.Lambda[System.Action[IntPtr]](Expression.Call(enter, target), hp).Compile()
        self._exit = Expression.Lambda[System.Action[IntPtr]](Expression.Call(leave, target), hp).Compile()
        self._hash = Expression.Lambda[System.Func[IntPtr, int]](Expression.Call(hash_code, target), hp).Compile()

        self.offset_to_string_data = int(RuntimeHelpers.OffsetToStringData)
        self.pointer_size = int(IntPtr.Size)
        self.managed_thread_id = int(System.Environment.CurrentManagedThreadId)
        self.string_type_handle = int(_t(String).TypeHandle.Value.ToInt64())
        from System.Reflection import BindingFlags

        flags = BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public
        #: String's instance fields as reflection names them, in declaration order
        self.string_fields = [str(f.Name) for f in _t(String).GetFields(flags)]

    # --- strings ---------------------------------------------------------------------------------

    @staticmethod
    def chars(units: list[int]) -> Array[Char]:
        """A char[] with exactly these UTF-16 code units (lone surrogates and U+0000 included)."""
        raw = b"".join(u.to_bytes(2, "little") for u in units)
        out = Array.CreateInstance(_t(Char), len(units))
        if units:
            Buffer.BlockCopy(Array[Byte](raw), 0, out, 0, len(raw))
        return out

    def new_pair(self, units: list[int], follower: list[int]) -> tuple[int, int]:
        """Two fresh strings allocated back to back (the second tells where the first one ends)."""
        handles = self._pair(self.chars(units), self.chars(follower))
        return handles[0].ToInt64(), handles[1].ToInt64()

    def empty(self) -> int:
        return self._empty().ToInt64()

    def interned(self, units: list[int]) -> int:
        return self._intern(self.chars(units)).ToInt64()

    def address(self, handle: int) -> int:
        """The object pointer of a pinned string (its characters' address minus OffsetToStringData)."""
        return GCHandle.FromIntPtr(IntPtr(handle)).AddrOfPinnedObject().ToInt64() - self.offset_to_string_data

    def enter(self, handle: int) -> None:
        self._enter(IntPtr(handle))

    def exit(self, handle: int) -> None:
        self._exit(IntPtr(handle))

    def hash_code(self, handle: int) -> int:
        return int(self._hash(IntPtr(handle))) & 0xFFFFFFFF
